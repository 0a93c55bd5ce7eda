#version 450
// Causal self-attention backward, query side: one query row i of one head per invocation.
//   qkv (B,T,3C), y (B,T,C), lse (B,NH,T), dy (B,T,C) -> dqkv[q part] =, delta (B,NH,T)
// With P_ij = exp(s_ij - lse_i) recomputed from the saved log-sum-exp and dP_ij = dy_i.v_j:
//   delta_i = sum_j P_ij dP_ij = dy_i.y_i   (written for the key/value kernel)
//   dq_i    = scale * sum_{j<=i} P_ij (dP_ij - delta_i) k_j
// STAGED (Form::Fused): keys and values from blocks of BC rows in shared memory, as the
// forward reads them.
#extension GL_GOOGLE_include_directive : require
#include "attention.h"

layout(local_size_x = BRIGADE_WG_ATTENTION) in;
layout(constant_id = BRIGADE_ATTENTION_SPEC_HS) const uint HS = 64;
layout(constant_id = BRIGADE_ATTENTION_SPEC_VEC4) const bool VEC4 = false;
layout(constant_id = BRIGADE_ATTENTION_SPEC_STAGED) const bool STAGED = false;
layout(constant_id = BRIGADE_ATTENTION_SPEC_BC) const uint BC = 32;
const uint HS4 = (HS + 3) / 4;  // a head row as vec4s; components past HS read as 0
shared vec4 Ks[STAGED ? BC * HS4 : 1], Vs[STAGED ? BC * HS4 : 1];

// Row buffers are bound both as floats and as vec4s (see attention.h).
layout(binding = 0) readonly buffer Qkv { float qkv[]; };
layout(binding = 0) readonly buffer Qkv4 { vec4 qkv4[]; };
layout(binding = 1) readonly buffer Y { float y[]; };
layout(binding = 1) readonly buffer Y4 { vec4 y4[]; };
layout(binding = 2) readonly buffer Lse { float lse[]; };
layout(binding = 3) readonly buffer Dy { float dy[]; };
layout(binding = 3) readonly buffer Dy4 { vec4 dy4[]; };
layout(binding = 4) buffer Dqkv { float dqkv[]; };
layout(binding = 4) buffer Dqkv4 { vec4 dqkv4[]; };
layout(binding = 5) writeonly buffer Delta { float delta[]; };
layout(push_constant) uniform Push { AttentionPush p; };

// Channels 4c .. 4c+3 of the head row starting at float `start` of each buffer.
vec4 load_qkv(uint start, uint c) {
  if (VEC4) return qkv4[start / 4 + c];
  vec4 v = vec4(0.0);
  for (uint e = 0; e < 4; ++e)
    if (4 * c + e < HS) v[e] = qkv[start + 4 * c + e];
  return v;
}

vec4 load_y(uint start, uint c) {
  if (VEC4) return y4[start / 4 + c];
  vec4 v = vec4(0.0);
  for (uint e = 0; e < 4; ++e)
    if (4 * c + e < HS) v[e] = y[start + 4 * c + e];
  return v;
}

vec4 load_dy(uint start, uint c) {
  if (VEC4) return dy4[start / 4 + c];
  vec4 v = vec4(0.0);
  for (uint e = 0; e < 4; ++e)
    if (4 * c + e < HS) v[e] = dy[start + 4 * c + e];
  return v;
}

void add_dqkv(uint start, uint c, vec4 v) {
  if (VEC4) {
    dqkv4[start / 4 + c] = v;
  } else {
    for (uint e = 0; e < 4; ++e)
      if (4 * c + e < HS) dqkv[start + 4 * c + e] = v[e];
  }
}

vec4 q[HS4], g[HS4], dq[HS4], kj[HS4];
float dsum = 0.0, lse_i;

void main() {
  const uint i = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y, b = p.first + gl_WorkGroupID.z;
  if (!STAGED && i >= p.T) return;  // staged, every invocation copies its share of each block
  const uint ii = min(i, p.T - 1);
  const uint row = 3 * p.C;
  const uint head = b * p.T * row + h * HS;  // q of time 0 for this (b, h)
  const uint yrow = (b * p.T + ii) * p.C + h * HS, stat = (b * p.NH + h) * p.T + ii;

  for (uint c = 0; c < HS4; ++c) {
    q[c] = p.scale * load_qkv(head + ii * row, c);
    g[c] = load_dy(yrow, c);
    dq[c] = vec4(0.0);
    dsum += dot(g[c], load_y(yrow, c));
  }
  if (i < p.T) delta[stat] = dsum;
  lse_i = lse[stat];

  if (!STAGED) {
    for (uint j = 0; j <= ii; ++j) {
      const uint k = head + j * row + p.C, v = k + p.C;
      float s = 0.0, dp = 0.0;
      for (uint c = 0; c < HS4; ++c) {
        kj[c] = load_qkv(k, c);  // kept: loads, not arithmetic, are what costs here
        s += dot(q[c], kj[c]), dp += dot(g[c], load_qkv(v, c));
      }
      const float ds = exp(s - lse_i) * (dp - dsum);
      for (uint c = 0; c < HS4; ++c) dq[c] += ds * kj[c];
    }
  } else {
    const uint last = min(p.T - 1, gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_WorkGroupSize.x - 1);
    for (uint j0 = 0; j0 <= last; j0 += BC) {
      for (uint x = gl_LocalInvocationIndex; x < BC * HS4; x += gl_WorkGroupSize.x) {
        const uint k = head + min(j0 + x / HS4, p.T - 1) * row + p.C;
        Ks[x] = load_qkv(k, x % HS4), Vs[x] = load_qkv(k + p.C, x % HS4);
      }
      barrier();
      const uint end = min(ii + 1, j0 + BC);
      for (uint j = j0; j < end; ++j) {
        const uint at = (j - j0) * HS4;
        float s = 0.0, dp = 0.0;
        for (uint c = 0; c < HS4; ++c) s += dot(q[c], Ks[at + c]), dp += dot(g[c], Vs[at + c]);
        const float ds = exp(s - lse_i) * (dp - dsum);
        for (uint c = 0; c < HS4; ++c) dq[c] += ds * Ks[at + c];
      }
      barrier();
    }
    if (i >= p.T) return;
  }
  for (uint c = 0; c < HS4; ++c) add_dqkv(head + i * row, c, p.scale * dq[c]);
}
