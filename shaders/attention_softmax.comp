#version 450
// Causal softmax of each row of scaled scores, in place, one row i of one head per invocation:
//   scores (B,NH,T,T): S_ij -> P_ij = exp(S_ij - m_i) / l_i for j <= i, exactly 0 for j > i
//   lse (B,NH,T) = m_i + log(l_i), the row's log-sum-exp (what backward keeps instead of P)
// with m_i the row's maximum over j <= i and l_i = sum_{j<=i} exp(S_ij - m_i). The masked
// zeros matter: the matmul P V that follows reads whole rows.
#extension GL_GOOGLE_include_directive : require
#include "attention.h"

layout(local_size_x = BRIGADE_WG_ATTENTION_ROWS) in;

layout(binding = 0) buffer Scores { float s[]; };
layout(binding = 1) writeonly buffer Lse { float lse[]; };
layout(push_constant) uniform Push { AttentionSoftmaxPush p; };

void main() {
  const uint i = gl_GlobalInvocationID.x, bh = gl_WorkGroupID.y;
  if (i >= p.T) return;
  const uint row = (bh * p.T + i) * p.T;

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
  lse[(p.first * p.NH + bh) * p.T + i] = m + log(l);
}
