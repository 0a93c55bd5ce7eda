#version 450
// Causal self-attention forward, one query row t of one head per invocation. Keys and values
// are streamed with an online softmax (running max m and sum l, the output rescaled when the
// max grows), so the (T,T) score matrix is never stored.
//   qkv (B,T,3C) -> y (B,T,C), lse (B,NH,T)
// lse = m + log(l), the log-sum-exp of the row's scaled scores: backward recomputes every
// probability as exp(s - lse) from it, which is why the forward saves only (B,NH,T) floats.
#extension GL_GOOGLE_include_directive : require
#include "attention.h"

layout(local_size_x = BRIGADE_WG_ATTENTION) in;
layout(constant_id = BRIGADE_ATTENTION_SPEC_HS) const uint HS = 64;
layout(constant_id = BRIGADE_ATTENTION_SPEC_VEC4) const bool VEC4 = false;
const uint HS4 = (HS + 3) / 4;  // a head row as vec4s; components past HS read as 0

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

void main() {
  const uint t = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
  if (t >= p.T) return;
  const uint row = 3 * p.C;
  const uint head = b * p.T * row + h * HS;  // q of time 0 for this (b, h)

  // Key 0, seen by every row, starts the max, the sum and the output.
  vec4 q[HS4], acc[HS4];
  float m = 0.0, l = 1.0;
  for (uint c = 0; c < HS4; ++c) {
    q[c] = p.scale * load_qkv(head + t * row, c);
    m += dot(q[c], load_qkv(head + p.C, c));
    acc[c] = load_qkv(head + 2 * p.C, c);
  }
  for (uint j = 1; j <= t; ++j) {
    const uint k = head + j * row + p.C, v = k + p.C;
    float s = 0.0;
    for (uint c = 0; c < HS4; ++c) s += dot(q[c], load_qkv(k, c));
    // One exp per key: a new maximum rescales the past by exp(m - s) and weighs this key 1;
    // otherwise the past keeps its scale and this key weighs exp(s - m).
    const float ex = exp(-abs(s - m));
    const float rescale = s > m ? ex : 1.0, e = s > m ? 1.0 : ex;
    m = max(m, s);
    l = l * rescale + e;
    for (uint c = 0; c < HS4; ++c) acc[c] = acc[c] * rescale + e * load_qkv(v, c);
  }

  const float inv = 1.0 / l;  // l >= 1: the maximum's own term is exp(0)
  for (uint c = 0; c < HS4; ++c) store_y((b * p.T + t) * p.C + h * HS, c, acc[c] * inv);
  lse[(b * p.NH + h) * p.T + t] = m + log(l);
}
