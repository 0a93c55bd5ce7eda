#version 450
// The inverse of attention_gather_heads: puts (or adds) heads back at their columns of a
// token tensor.
//   heads (parts, B,NH,T,HS) -> tokens (B,T,row)   (= or +=)
#extension GL_GOOGLE_include_directive : require
#include "attention.h"

layout(local_size_x = BRIGADE_WG_ATTENTION_HEADS) in;
layout(constant_id = BRIGADE_ATTENTION_SPEC_ACCUMULATE) const bool ACCUMULATE = false;
layout(constant_id = BRIGADE_ATTENTION_SPEC_VEC4) const bool VEC4 = false;
const uint W = VEC4 ? 4 : 1;  // floats per invocation

layout(binding = 0) buffer Tokens { float tokens[]; };
layout(binding = 0) buffer Tokens4 { vec4 tokens4[]; };
layout(binding = 1) readonly buffer Heads { float heads[]; };
layout(binding = 1) readonly buffer Heads4 { vec4 heads4[]; };
layout(push_constant) uniform Push { AttentionHeadsPush p; };

void main() {
  const uint e = gl_GlobalInvocationID.x, hs = p.HS / W;  // e = t * hs + d / W
  if (e >= p.T * hs) return;
  const uint bh = gl_WorkGroupID.y, part = gl_WorkGroupID.z;
  const uint b = bh / p.NH, h = bh % p.NH, t = e / hs, d = e % hs * W;
  const uint to = ((p.first + b) * p.T + t) * p.row + (part * p.NH + h) * p.HS + d;
  const uint from = part * p.part_stride + (bh * p.T + t) * p.HS + d;
  if (VEC4) {
    const vec4 v = heads4[from / 4];
    tokens4[to / 4] = ACCUMULATE ? tokens4[to / 4] + v : v;
  } else {
    const float v = heads[from];
    tokens[to] = ACCUMULATE ? tokens[to] + v : v;
  }
}
