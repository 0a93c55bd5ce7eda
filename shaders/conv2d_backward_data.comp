#version 450
// Conv2d backward-data: dx += conv_transpose(dy, weight).
//   dy (N, OC, OH, OW)  weight (OC, IC, KH, KW)  ->  dx (N, IC, H, W), accumulated
// dx[n, ic, ih, iw] sums dy[n, oc, oh, ow] * weight[oc, ic, kh, kw] over the taps with
// ih = oh * stride_h - pad_h + kh (and likewise for w). Each invocation gathers ICB input
// channels x PX pixels of one input row. With stride s the pixels of one invocation are s
// apart (one stride phase), so they all meet the same kernel columns and the loops can step
// straight over the valid taps instead of testing divisibility per tap.
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_CONV) in;
// Register tile (see conv.h); the launcher always sets it.
layout(constant_id = 0) const uint ICB = 1;
layout(constant_id = 1) const uint PX = 1;

layout(binding = 0) readonly buffer DY { float dy[]; };
layout(binding = 1) readonly buffer Wt { float w[]; };
layout(binding = 2) buffer DX { float dx[]; };
layout(push_constant) uniform Push { Conv2dPush p; };

void main() {
  // Per input row: stride_w phases, each cut into blocks of PX pixels.
  const uint per_phase = (p.w + p.stride_w - 1) / p.stride_w;
  const uint blocks_per_phase = (per_phase + PX - 1) / PX;
  const uint blocks_per_row = p.stride_w * blocks_per_phase;
  const uint i = gl_GlobalInvocationID.x;
  if (i >= p.h * blocks_per_row) return;
  const uint ih = i / blocks_per_row, rest = i % blocks_per_row;
  const uint phase = rest / blocks_per_phase, m0 = (rest % blocks_per_phase) * PX;
  if (phase >= p.w) return;  // W < stride_w: the phase has no pixels
  const uint ic0 = gl_WorkGroupID.y * ICB, n = gl_WorkGroupID.z;

  float acc[ICB][PX];
  for (uint c = 0; c < ICB; ++c)
    for (uint j = 0; j < PX; ++j) acc[c][j] = 0.0;
  // Input channels of a tail block past IC are clamped to the last one and not stored.
  const uint taps = p.kh * p.kw;
  uint wbase[ICB];
  for (uint c = 0; c < ICB; ++c) wbase[c] = min(ic0 + c, p.ic - 1) * taps;

  // Kernel rows that reach this input row: kh = (ih + pad_h) mod stride_h, + stride_h, ...
  for (uint kh = (ih + p.pad_h) % p.stride_h; kh < p.kh && kh <= ih + p.pad_h; kh += p.stride_h) {
    const uint oh = (ih + p.pad_h - kh) / p.stride_h;
    if (oh >= p.oh) continue;
    for (uint kw = (phase + p.pad_w) % p.stride_w; kw < p.kw; kw += p.stride_w) {
      // Output column of pixel j: m0 + j + (phase + pad_w - kw) / stride_w, an exact division.
      const int ow0 = int(m0) + (int(phase + p.pad_w) - int(kw)) / int(p.stride_w);
      for (uint oc = 0; oc < p.oc; ++oc) {
        const uint row = ((n * p.oc + oc) * p.oh + oh) * p.ow;
        float g[PX];
        for (uint j = 0; j < PX; ++j) {
          const int ow = ow0 + int(j);
          g[j] = 0.0;
          if (ow >= 0 && ow < int(p.ow)) g[j] = dy[row + uint(ow)];
        }
        const uint tap = oc * p.ic * taps + kh * p.kw + kw;
        for (uint c = 0; c < ICB; ++c) {
          const float wv = w[tap + wbase[c]];
          for (uint j = 0; j < PX; ++j) acc[c][j] += wv * g[j];
        }
      }
    }
  }

  for (uint c = 0; c < ICB; ++c) {
    const uint ic = ic0 + c;
    if (ic >= p.ic) break;
    const uint row = ((n * p.ic + ic) * p.h + ih) * p.w;
    for (uint j = 0; j < PX; ++j) {
      const uint iw = phase + (m0 + j) * p.stride_w;
      if (iw < p.w) dx[row + iw] += acc[c][j];
    }
  }
}
