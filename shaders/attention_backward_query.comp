#version 450
// Causal self-attention backward, query side: one query row i per invocation.
//   qkv (B,T,3C), y (B,T,C), lse (B,NH,T), dy (B,T,C) -> dqkv[q part] +=, delta (B,NH,T)
// With P_ij = exp(s_ij - lse_i) recomputed from the saved log-sum-exp and dP_ij = dy_i.v_j:
//   delta_i = sum_j P_ij dP_ij = dy_i.y_i   (written for the key/value kernel)
//   dq_i    = scale * sum_{j<=i} P_ij (dP_ij - delta_i) k_j
#extension GL_GOOGLE_include_directive : require
#include "attention.h"

layout(local_size_x = BRIGADE_WG_ATTENTION) in;
layout(constant_id = BRIGADE_ATTENTION_SPEC_HS) const uint HS = 64;

layout(binding = 0) readonly buffer Qkv { float qkv[]; };
layout(binding = 1) readonly buffer Y { float y[]; };
layout(binding = 2) readonly buffer Lse { float lse[]; };
layout(binding = 3) readonly buffer Dy { float dy[]; };
layout(binding = 4) buffer Dqkv { float dqkv[]; };
layout(binding = 5) writeonly buffer Delta { float delta[]; };
layout(push_constant) uniform Push { AttentionPush p; };

void main() {
  const uint i = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
  if (i >= p.T) return;
  const uint row = 3 * p.C;
  const uint head = b * p.T * row + h * HS;  // q of time 0 for this (b, h)
  const uint yrow = (b * p.T + i) * p.C + h * HS;
  const uint stat = (b * p.NH + h) * p.T + i;

  float q[HS], g[HS], dq[HS];
  float dsum = 0.0;
  for (uint d = 0; d < HS; ++d) {
    q[d] = p.scale * qkv[head + i * row + d];
    g[d] = dy[yrow + d];
    dq[d] = 0.0;
    dsum += g[d] * y[yrow + d];
  }
  delta[stat] = dsum;
  const float lse_i = lse[stat];

  for (uint j = 0; j <= i; ++j) {
    const uint k = head + j * row + p.C, v = k + p.C;
    float s = 0.0, dp = 0.0;
    for (uint d = 0; d < HS; ++d) s += q[d] * qkv[k + d], dp += g[d] * qkv[v + d];
    const float ds = exp(s - lse_i) * (dp - dsum);
    for (uint d = 0; d < HS; ++d) dq[d] += ds * qkv[k + d];
  }
  for (uint d = 0; d < HS; ++d) dqkv[head + i * row + d] += p.scale * dq[d];
}
