#version 450
// Causal self-attention backward, key/value side: one key row j per invocation, after
// attention_backward_query has written delta.
//   qkv (B,T,3C), lse (B,NH,T), dy (B,T,C), delta (B,NH,T) -> dqkv[k and v parts] +=
// With P_ij = exp(s_ij - lse_i) and dP_ij = dy_i.v_j, over the queries that see key j:
//   dv_j = sum_{i>=j} P_ij dy_i
//   dk_j = scale * sum_{i>=j} P_ij (dP_ij - delta_i) q_i
// Each dqkv element has exactly one writer in the two kernels, so += needs no atomics.
#extension GL_GOOGLE_include_directive : require
#include "attention.h"

layout(local_size_x = BRIGADE_WG_ATTENTION) in;
layout(constant_id = BRIGADE_ATTENTION_SPEC_HS) const uint HS = 64;

layout(binding = 0) readonly buffer Qkv { float qkv[]; };
layout(binding = 1) readonly buffer Lse { float lse[]; };
layout(binding = 2) readonly buffer Dy { float dy[]; };
layout(binding = 3) buffer Dqkv { float dqkv[]; };
layout(binding = 4) readonly buffer Delta { float delta[]; };
layout(push_constant) uniform Push { AttentionPush p; };

void main() {
  const uint j = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
  if (j >= p.T) return;
  const uint row = 3 * p.C;
  const uint head = b * p.T * row + h * HS;  // q of time 0 for this (b, h)
  const uint kj = head + j * row + p.C, vj = kj + p.C;

  float k[HS], v[HS], dk[HS], dv[HS];
  for (uint d = 0; d < HS; ++d) {
    k[d] = p.scale * qkv[kj + d];
    v[d] = qkv[vj + d];
    dk[d] = 0.0;
    dv[d] = 0.0;
  }

  for (uint i = j; i < p.T; ++i) {
    const uint q = head + i * row, g = (b * p.T + i) * p.C + h * HS;
    const uint stat = (b * p.NH + h) * p.T + i;
    float s = 0.0, dp = 0.0;
    for (uint d = 0; d < HS; ++d) s += k[d] * qkv[q + d], dp += v[d] * dy[g + d];
    const float pij = exp(s - lse[stat]);
    const float ds = pij * (dp - delta[stat]);
    for (uint d = 0; d < HS; ++d) dv[d] += pij * dy[g + d], dk[d] += ds * qkv[q + d];
  }
  for (uint d = 0; d < HS; ++d) {
    dqkv[kj + d] += p.scale * dk[d];
    dqkv[vj + d] += dv[d];
  }
}
