#version 450
// Causal self-attention forward, one query row t of one head per invocation. Keys and values
// are streamed with an online softmax (running max m and sum l, the output rescaled when the
// max grows), so the (T,T) score matrix is never stored.
//   qkv (B,T,3C) -> y (B,T,C), lse (B,NH,T)
// lse = m + log(l), the log-sum-exp of the row's scaled scores: backward recomputes every
// probability as exp(s - lse) from it, which is why the forward saves only (B,NH,T) floats.
// STAGED (Form::Fused, flash attention on SIMT cores): the workgroup's 64 rows read keys and
// values from blocks of BC rows it copies into shared memory together.
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
layout(binding = 1) writeonly buffer Y { float y[]; };
layout(binding = 1) writeonly buffer Y4 { vec4 y4[]; };
layout(binding = 2) writeonly buffer Lse { float lse[]; };
layout(push_constant) uniform Push { AttentionPush p; };

// Channels 4c .. 4c+3 of the head row starting at float `start`.
vec4 load_qkv(uint start, uint c) {
  if (VEC4) return qkv4[start / 4 + c];
  vec4 v = vec4(0.0);
  for (uint e = 0; e < 4; ++e)
    if (4 * c + e < HS) v[e] = qkv[start + 4 * c + e];
  return v;
}

void store_y(uint start, uint c, vec4 v) {
  if (VEC4) {
    y4[start / 4 + c] = v;
  } else {
    for (uint e = 0; e < 4; ++e)
      if (4 * c + e < HS) y[start + 4 * c + e] = v[e];
  }
}

// The running max m, sum l and output acc of a row after one more key, scaled score s and
// value v (channels c of `value`). One exp per key: a new maximum rescales the past by
// exp(m - s) and weighs this key 1; otherwise the past keeps its scale and this key weighs
// exp(s - m). From m = -FLT_MAX, l = 0, acc = 0 the first key gives m = s, l = 1, acc = v.
float m = -3.402823466e38, l = 0.0;
vec4 q[HS4], acc[HS4];
float rescale_for(float s, out float e) {
  const float ex = exp(-abs(s - m));
  e = s > m ? 1.0 : ex;
  const float rescale = s > m ? ex : 1.0;
  m = max(m, s);
  l = l * rescale + e;
  return rescale;
}

void main() {
  const uint t = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y, b = p.first + gl_WorkGroupID.z;
  if (!STAGED && t >= p.T) return;  // staged, every invocation copies its share of each block
  const uint ti = min(t, p.T - 1);
  const uint row = 3 * p.C;
  const uint head = b * p.T * row + h * HS;  // q of time 0 for this (b, h)
  for (uint c = 0; c < HS4; ++c) q[c] = p.scale * load_qkv(head + ti * row, c), acc[c] = vec4(0.0);

  if (!STAGED) {
    for (uint j = 0; j <= ti; ++j) {
      const uint k = head + j * row + p.C, v = k + p.C;
      float s = 0.0, e;
      for (uint c = 0; c < HS4; ++c) s += dot(q[c], load_qkv(k, c));
      const float rescale = rescale_for(s, e);
      for (uint c = 0; c < HS4; ++c) acc[c] = acc[c] * rescale + e * load_qkv(v, c);
    }
  } else {
    const uint last = min(p.T - 1, gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_WorkGroupSize.x - 1);
    for (uint j0 = 0; j0 <= last; j0 += BC) {
      // Consecutive invocations copy consecutive vec4s of the block's rows.
      for (uint x = gl_LocalInvocationIndex; x < BC * HS4; x += gl_WorkGroupSize.x) {
        const uint k = head + min(j0 + x / HS4, p.T - 1) * row + p.C;
        Ks[x] = load_qkv(k, x % HS4), Vs[x] = load_qkv(k + p.C, x % HS4);
      }
      barrier();
      const uint end = min(ti + 1, j0 + BC);
      for (uint j = j0; j < end; ++j) {
        const uint at = (j - j0) * HS4;
        float s = 0.0, e;
        for (uint c = 0; c < HS4; ++c) s += dot(q[c], Ks[at + c]);
        const float rescale = rescale_for(s, e);
        for (uint c = 0; c < HS4; ++c) acc[c] = acc[c] * rescale + e * Vs[at + c];
      }
      barrier();
    }
    if (t >= p.T) return;
  }

  const float inv = 1.0 / l;  // l >= 1: the maximum's own term is exp(0)
  for (uint c = 0; c < HS4; ++c) store_y((b * p.T + t) * p.C + h * HS, c, acc[c] * inv);
  lse[(b * p.NH + h) * p.T + t] = m + log(l);
}
