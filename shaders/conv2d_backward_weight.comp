#version 450
// Conv2d backward-weight: dweight += sum over (n, oh, ow) of dy x im2col(x).
//   dy (N, OC, OH, OW)  x (N, IC, H, W)  ->  dweight (OC, IC, KH, KW), accumulated
// Seen as a matrix product dweight[oc, k] = sum_p dy[oc, p] * cols[p, k] with k = (ic, kh, kw)
// and p = (n, oh, ow). A workgroup owns an OCB x KB tile of dweight; its invocations split p,
// each keeping OCB x KB partial sums in registers, and then add them up in shared memory
// along a fixed tree: the same sums in the same order on every run, with no float atomics.
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_CONV_REDUCE) in;
// Register tile (see conv.h); the launcher always sets it.
layout(constant_id = 0) const uint OCB = 1;
layout(constant_id = 1) const uint KB = 1;

layout(binding = 0) readonly buffer DY { float dy[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 2) buffer DW { float dw[]; };
layout(push_constant) uniform Push { Conv2dPush p; };

shared float partial[OCB * KB][BRIGADE_WG_CONV_REDUCE];

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint taps = p.kh * p.kw, k_total = p.ic * taps;
  const uint k0 = gl_WorkGroupID.x * KB, oc0 = gl_WorkGroupID.y * OCB;

  // Columns and rows of a tail tile past K or OC are clamped to the last one, not stored.
  uint plane[KB];  // offset of the tap's input channel within one image
  int kh[KB], kw[KB];
  for (uint t = 0; t < KB; ++t) {
    const uint k = min(k0 + t, k_total - 1), tap = k % taps;
    plane[t] = (k / taps) * p.h * p.w;
    kh[t] = int(tap / p.kw) - int(p.pad_h);
    kw[t] = int(tap % p.kw) - int(p.pad_w);
  }
  uint dy_plane[OCB];
  for (uint o = 0; o < OCB; ++o) dy_plane[o] = min(oc0 + o, p.oc - 1) * p.oh * p.ow;

  float acc[OCB][KB];
  for (uint o = 0; o < OCB; ++o)
    for (uint t = 0; t < KB; ++t) acc[o][t] = 0.0;

  // Walk p = tid, tid + WG, ... as (n, oh, ow) counters, carrying instead of dividing.
  const uint step = BRIGADE_WG_CONV_REDUCE, ohw = p.oh * p.ow;
  const uint step_ow = step % p.ow, step_oh = (step / p.ow) % p.oh, step_n = step / ohw;
  uint n = tid / ohw, oh = (tid % ohw) / p.ow, ow = tid % p.ow;
  for (uint q = tid; q < p.n * ohw; q += step) {
    const uint dy_at = n * p.oc * ohw + oh * p.ow + ow;
    float g[OCB];
    for (uint o = 0; o < OCB; ++o) g[o] = dy[dy_at + dy_plane[o]];
    const int ih0 = int(oh * p.stride_h), iw0 = int(ow * p.stride_w);
    const uint image = n * p.ic * p.h * p.w;
    for (uint t = 0; t < KB; ++t) {
      const int ih = ih0 + kh[t], iw = iw0 + kw[t];
      if (ih < 0 || ih >= int(p.h) || iw < 0 || iw >= int(p.w)) continue;
      const float xv = x[image + plane[t] + uint(ih) * p.w + uint(iw)];
      for (uint o = 0; o < OCB; ++o) acc[o][t] += g[o] * xv;
    }
    ow += step_ow;
    const uint carry_w = ow >= p.ow ? 1u : 0u;
    ow -= carry_w * p.ow;
    oh += step_oh + carry_w;
    const uint carry_h = oh >= p.oh ? 1u : 0u;
    oh -= carry_h * p.oh;
    n += step_n + carry_h;
  }

  for (uint o = 0; o < OCB; ++o)
    for (uint t = 0; t < KB; ++t) partial[o * KB + t][tid] = acc[o][t];
  for (uint half_ = BRIGADE_WG_CONV_REDUCE / 2; half_ > 0; half_ /= 2) {
    barrier();
    if (tid < half_)
      for (uint e = 0; e < OCB * KB; ++e) partial[e][tid] += partial[e][tid + half_];
  }
  barrier();
  for (uint e = tid; e < OCB * KB; e += BRIGADE_WG_CONV_REDUCE) {
    const uint oc = oc0 + e / KB, k = k0 + e % KB;
    if (oc < p.oc && k < k_total) dw[oc * k_total + k] += partial[e][0];
  }
}
