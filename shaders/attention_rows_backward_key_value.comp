#version 450
// Causal self-attention backward, key/value side: one key row j of one head per invocation,
// after attention_backward_query has written delta.
//   qkv (B,T,3C), lse (B,NH,T), dy (B,T,C), delta (B,NH,T) -> dqkv[k and v parts] =
// With P_ij = exp(s_ij - lse_i) and dP_ij = dy_i.v_j, over the queries that see key j:
//   dv_j = sum_{i>=j} P_ij dy_i
//   dk_j = scale * sum_{i>=j} P_ij (dP_ij - delta_i) q_i
// Each dqkv element has exactly one writer in the two kernels, which writes it whole.
// STAGED (Form::Fused): queries, output gradients, lse and delta from blocks of BC rows in
// shared memory.
#extension GL_GOOGLE_include_directive : require
#include "attention.h"

layout(local_size_x = BRIGADE_WG_ATTENTION) in;
layout(constant_id = BRIGADE_ATTENTION_SPEC_HS) const uint HS = 64;
layout(constant_id = BRIGADE_ATTENTION_SPEC_VEC4) const bool VEC4 = false;
layout(constant_id = BRIGADE_ATTENTION_SPEC_STAGED) const bool STAGED = false;
layout(constant_id = BRIGADE_ATTENTION_SPEC_BC) const uint BC = 32;
const uint HS4 = (HS + 3) / 4;  // a head row as vec4s; components past HS read as 0
shared vec4 Qs[STAGED ? BC * HS4 : 1], Gs[STAGED ? BC * HS4 : 1];
shared float Ls[STAGED ? BC : 1], Ds[STAGED ? BC : 1];

// Row buffers are bound both as floats and as vec4s (see attention.h).
layout(binding = 0) readonly buffer Qkv { float qkv[]; };
layout(binding = 0) readonly buffer Qkv4 { vec4 qkv4[]; };
layout(binding = 1) readonly buffer Lse { float lse[]; };
layout(binding = 2) readonly buffer Dy { float dy[]; };
layout(binding = 2) readonly buffer Dy4 { vec4 dy4[]; };
layout(binding = 3) buffer Dqkv { float dqkv[]; };
layout(binding = 3) buffer Dqkv4 { vec4 dqkv4[]; };
layout(binding = 4) readonly buffer Delta { float delta[]; };
layout(push_constant) uniform Push { AttentionPush p; };

// Channels 4c .. 4c+3 of the head row starting at float `start` of each buffer.
vec4 load_qkv(uint start, uint c) {
  if (VEC4) return qkv4[start / 4 + c];
  vec4 v = vec4(0.0);
  for (uint e = 0; e < 4; ++e)
    if (4 * c + e < HS) v[e] = qkv[start + 4 * c + e];
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

void main() {
  const uint j = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y, b = p.first + gl_WorkGroupID.z;
  if (!STAGED && j >= p.T) return;  // staged, every invocation copies its share of each block
  const uint jj = min(j, p.T - 1);
  const uint row = 3 * p.C;
  const uint head = b * p.T * row + h * HS;  // q of time 0 for this (b, h)
  const uint stats = (b * p.NH + h) * p.T;   // lse and delta of time 0

  vec4 k[HS4], v[HS4], dk[HS4], dv[HS4], qi[HS4], gi[HS4];
  for (uint c = 0; c < HS4; ++c) {
    k[c] = p.scale * load_qkv(head + jj * row + p.C, c);
    v[c] = load_qkv(head + jj * row + 2 * p.C, c);
    dk[c] = vec4(0.0), dv[c] = vec4(0.0);
  }

  if (!STAGED) {
    for (uint i = jj; i < p.T; ++i) {
      const uint q = head + i * row, g = (b * p.T + i) * p.C + h * HS;
      float s = 0.0, dp = 0.0;
      for (uint c = 0; c < HS4; ++c) {
        qi[c] = load_qkv(q, c), gi[c] = load_dy(g, c);  // kept: loads are what costs here
        s += dot(k[c], qi[c]), dp += dot(v[c], gi[c]);
      }
      const float pij = exp(s - lse[stats + i]);
      const float ds = pij * (dp - delta[stats + i]);
      for (uint c = 0; c < HS4; ++c) dv[c] += pij * gi[c], dk[c] += ds * qi[c];
    }
  } else {
    // The queries that see any of the workgroup's keys: from its first key to the end.
    for (uint i0 = gl_WorkGroupID.x * gl_WorkGroupSize.x; i0 < p.T; i0 += BC) {
      for (uint x = gl_LocalInvocationIndex; x < BC * HS4; x += gl_WorkGroupSize.x) {
        const uint i = min(i0 + x / HS4, p.T - 1);
        Qs[x] = load_qkv(head + i * row, x % HS4), Gs[x] = load_dy((b * p.T + i) * p.C + h * HS, x % HS4);
      }
      for (uint x = gl_LocalInvocationIndex; x < BC; x += gl_WorkGroupSize.x) {
        const uint i = min(i0 + x, p.T - 1);
        Ls[x] = lse[stats + i], Ds[x] = delta[stats + i];
      }
      barrier();
      const uint end = min(p.T, i0 + BC);
      for (uint i = max(jj, i0); i < end; ++i) {
        const uint at = (i - i0) * HS4;
        float s = 0.0, dp = 0.0;
        for (uint c = 0; c < HS4; ++c) s += dot(k[c], Qs[at + c]), dp += dot(v[c], Gs[at + c]);
        const float pij = exp(s - Ls[i - i0]);
        const float ds = pij * (dp - Ds[i - i0]);
        for (uint c = 0; c < HS4; ++c) dv[c] += pij * Gs[at + c], dk[c] += ds * Qs[at + c];
      }
      barrier();
    }
    if (j >= p.T) return;
  }
  for (uint c = 0; c < HS4; ++c) {
    add_dqkv(head + j * row + p.C, c, p.scale * dk[c]);
    add_dqkv(head + j * row + 2 * p.C, c, dv[c]);
  }
}
