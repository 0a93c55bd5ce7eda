#version 450
// Conv2d forward: y = conv(x, weight) + bias.
//   x (N, IC, H, W)  weight (OC, IC, KH, KW)  bias (OC)  ->  y (N, OC, OH, OW)
// Each invocation computes OCB output channels x PX neighbouring pixels of one output row,
// so every input load feeds OCB FMAs and every weight load PX. The weight index depends on
// the workgroup only (uniform), which CPU drivers turn into one scalar load.
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_CONV) in;
// Register tile (see conv.h); the launcher always sets it.
layout(constant_id = 0) const uint OCB = 1;
layout(constant_id = 1) const uint PX = 1;
// Without a bias the launcher binds the weight again at binding 2; it is never read.
layout(constant_id = 2) const bool HAS_BIAS = true;

layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer Wt { float w[]; };
layout(binding = 2) readonly buffer Bias { float bias[]; };
layout(binding = 3) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Push { Conv2dPush p; };

void main() {
  const uint blocks_per_row = (p.ow + PX - 1) / PX;
  const uint i = gl_GlobalInvocationID.x;
  if (i >= p.oh * blocks_per_row) return;
  const uint oh = i / blocks_per_row, ow0 = (i % blocks_per_row) * PX;
  const uint oc0 = gl_WorkGroupID.y * OCB, n = gl_WorkGroupID.z;

  float acc[OCB][PX];
  for (uint o = 0; o < OCB; ++o)
    for (uint j = 0; j < PX; ++j) acc[o][j] = 0.0;
  // Weight rows of a tail block past OC are clamped to the last channel and not stored.
  uint wbase[OCB];
  const uint per_oc = p.ic * p.kh * p.kw;
  for (uint o = 0; o < OCB; ++o) wbase[o] = min(oc0 + o, p.oc - 1) * per_oc;

  const int ih0 = int(oh * p.stride_h) - int(p.pad_h);
  const int iw0 = int(ow0 * p.stride_w) - int(p.pad_w);
  for (uint ic = 0; ic < p.ic; ++ic) {
    const uint plane = (n * p.ic + ic) * p.h * p.w;
    for (uint kh = 0; kh < p.kh; ++kh) {
      const int ih = ih0 + int(kh);
      if (ih < 0 || ih >= int(p.h)) continue;
      const uint row = plane + uint(ih) * p.w;
      const uint tap = (ic * p.kh + kh) * p.kw;
      for (uint kw = 0; kw < p.kw; ++kw) {
        float xv[PX];
        for (uint j = 0; j < PX; ++j) {
          const int iw = iw0 + int(j * p.stride_w + kw);
          xv[j] = 0.0;
          if (iw >= 0 && iw < int(p.w)) xv[j] = x[row + uint(iw)];
        }
        for (uint o = 0; o < OCB; ++o) {
          const float wv = w[wbase[o] + tap + kw];
          for (uint j = 0; j < PX; ++j) acc[o][j] += wv * xv[j];
        }
      }
    }
  }

  for (uint o = 0; o < OCB; ++o) {
    const uint oc = oc0 + o;
    if (oc >= p.oc) break;
    const float b = HAS_BIAS ? bias[oc] : 0.0;
    const uint dst = ((n * p.oc + oc) * p.oh + oh) * p.ow;
    for (uint j = 0; j < PX; ++j)
      if (ow0 + j < p.ow) y[dst + ow0 + j] = acc[o][j] + b;
  }
}
