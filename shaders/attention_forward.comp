#version 450
// Causal self-attention forward, one query row per invocation. Keys and values are streamed
// with an online softmax (running max m and sum l, output rescaled when the max grows), so
// the (T,T) score matrix is never stored.
//   qkv (B,T,3C) -> y (B,T,C), lse (B,NH,T)
// lse = m + log(l), the log-sum-exp of the row's scaled scores: backward recomputes every
// probability as exp(s - lse) from it, which is why the forward saves only (B,NH,T) floats.
#extension GL_GOOGLE_include_directive : require
#include "attention.h"

layout(local_size_x = BRIGADE_WG_ATTENTION) in;
layout(constant_id = BRIGADE_ATTENTION_SPEC_HS) const uint HS = 64;
layout(constant_id = BRIGADE_ATTENTION_SPEC_KEY_BLOCK) const uint KB = 8;

layout(binding = 0) readonly buffer Qkv { float qkv[]; };
layout(binding = 1) writeonly buffer Y { float y[]; };
layout(binding = 2) writeonly buffer Lse { float lse[]; };
layout(push_constant) uniform Push { AttentionPush p; };

// Score of keys past t, for the block maximum only; their weight is set to 0 directly, so
// no exp ever sees an infinite or huge argument.
const float kMasked = -3.402823466e38;

void main() {
  const uint t = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
  if (t >= p.T) return;
  const uint row = 3 * p.C;
  const uint head = b * p.T * row + h * HS;  // q of time 0 for this (b, h)

  float q[HS], acc[HS];
  for (uint d = 0; d < HS; ++d) q[d] = p.scale * qkv[head + t * row + d], acc[d] = 0.0;
  float m = kMasked, l = 0.0;
  for (uint j0 = 0; j0 <= t; j0 += KB) {
    // Scores of one block of keys; a block always holds key j0 <= t, so mb is a real score.
    float s[KB];
    float mb = m;
    for (uint i = 0; i < KB; ++i) {
      const uint k = head + min(j0 + i, t) * row + p.C;  // clamped: masked keys read a valid row
      float dot = 0.0;
      for (uint d = 0; d < HS; ++d) dot += q[d] * qkv[k + d];
      s[i] = j0 + i <= t ? dot : kMasked;
      mb = max(mb, s[i]);
    }
    // Before the first block l and acc are 0, so the factor is irrelevant; 0 avoids exp(-huge).
    const float rescale = j0 == 0 ? 0.0 : exp(m - mb);
    l *= rescale;
    for (uint d = 0; d < HS; ++d) acc[d] *= rescale;
    for (uint i = 0; i < KB; ++i) {
      const float e = j0 + i <= t ? exp(s[i] - mb) : 0.0;
      const uint v = head + min(j0 + i, t) * row + 2 * p.C;
      l += e;
      for (uint d = 0; d < HS; ++d) acc[d] += e * qkv[v + d];
    }
    m = mb;
  }

  const uint yrow = (b * p.T + t) * p.C + h * HS;
  const float inv = 1.0 / l;  // l >= 1: the maximum's own term is exp(0)
  for (uint d = 0; d < HS; ++d) y[yrow + d] = acc[d] * inv;
  lse[(b * p.NH + h) * p.T + t] = m + log(l);
}
