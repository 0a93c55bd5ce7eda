#version 450
// Causal softmax of each row of scaled scores, in place, one row i of one head per invocation:
//   scores (B,NH,T,T): S_ij -> P_ij = exp(S_ij - m_i) / l_i for j <= i, exactly 0 for j > i
//   lse (B,NH,T) = m_i + log(l_i), the row's log-sum-exp (what backward keeps instead of P)
// with m_i the row's maximum over j <= i and l_i = sum_{j<=i} exp(S_ij - m_i). The masked
// zeros matter: the matmul P V that follows reads whole rows. With VEC4 and a 16-bit FORMAT_P,
// P goes packed to a binding of its own instead (attention.h).
#extension GL_GOOGLE_include_directive : require
#include "attention.h"
#include "formats.glsl"

layout(local_size_x = BRIGADE_WG_ATTENTION_ROWS) in;

// VEC4 (T % 4 == 0, scores 16-byte aligned): the row four keys at a time, in three passes
// (the maximum, the sum, the probabilities) with the keys past i left out of the last quad;
// P over the scores, or packed (FORMAT_P, attention.h).
layout(constant_id = BRIGADE_ATTENTION_SPEC_VEC4) const bool VEC4 = false;

layout(binding = 0) buffer Scores { float s[]; };
layout(binding = 0) buffer Scores4 { vec4 s4[]; };
layout(binding = 1) writeonly buffer Lse { float lse[]; };
// P packed (FORMAT_P 16-bit, VEC4 only), laid out as the scores; otherwise bound to anything.
layout(binding = 2) writeonly buffer Packed { uvec2 pw2[]; };
layout(push_constant) uniform Push { AttentionSoftmaxPush p; };
BRIGADE_FORMAT(BRIGADE_ATTENTION_SPEC_FORMAT_P, FORMAT_P);

// Quad q of the row's P as the products read it.
void store_p(uint q, vec4 v) {
  if (FORMAT_P == BRIGADE_FORMAT_FP32) s4[q] = v;
  else pw2[q] = quad_out(v, FORMAT_P);
}

void main() {
  const uint i = gl_GlobalInvocationID.x, bh = gl_WorkGroupID.y;
  if (i >= p.T) return;
  const uint row = (bh * p.T + i) * p.T;
  if (VEC4) {
    const uint at = row / 4, last = i / 4;  // the quad that holds key i
    const float none = uintBitsToFloat(0xff800000u);  // -inf: no key yet
    vec4 top = vec4(none);
    for (uint q = 0; q <= last; ++q)
      top = max(top, mix(vec4(none), s4[at + q], keys_kept(q, i)));
    const float m = max(max(top.x, top.y), max(top.z, top.w));
    vec4 sum = vec4(0.0);
    for (uint q = 0; q <= last; ++q)
      sum += mix(vec4(0.0), exp(s4[at + q] - m), keys_kept(q, i));
    const float l = (sum.x + sum.y) + (sum.z + sum.w), inv = 1.0 / l;
    for (uint q = 0; q <= last; ++q)
      store_p(at + q, mix(vec4(0.0), exp(s4[at + q] - m) * inv, keys_kept(q, i)));
    for (uint q = last + 1; q < p.T / 4; ++q) store_p(at + q, vec4(0.0));
    lse[(p.first * p.NH + p.head + bh) * p.T + i] = m + log(l);
    return;
  }

  // One pass for the maximum and the sum, with one exp per key: a new maximum rescales the
  // sum by exp(m - s) and weighs this key 1; otherwise the key weighs exp(s - m).
  float m = s[row], l = 1.0;
  for (uint j = 1; j <= i; ++j) {
    const float x = s[row + j], ex = exp(-abs(x - m));
    l = x > m ? l * ex + 1.0 : l + ex;
    m = max(m, x);
  }
  const float inv = 1.0 / l;  // l >= 1: the maximum's own term is exp(0)
  for (uint j = 0; j <= i; ++j) s[row + j] = exp(s[row + j] - m) * inv;
  for (uint j = i + 1; j < p.T; ++j) s[row + j] = 0.0;
  lse[(p.first * p.NH + p.head + bh) * p.T + i] = m + log(l);
}
