#version 450
// The inverse of attention_gather_heads: puts (or adds) heads back at their columns of a
// token tensor.
//   heads (parts, B,NH,T,HS) -> tokens (B,T,row)   (= or +=)
#extension GL_GOOGLE_include_directive : require
#include "attention.h"

layout(local_size_x = BRIGADE_WG_ATTENTION_HEADS) in;
layout(constant_id = BRIGADE_ATTENTION_SPEC_ACCUMULATE) const bool ACCUMULATE = false;

layout(binding = 0) buffer Tokens { float tokens[]; };
layout(binding = 1) readonly buffer Heads { float heads[]; };
layout(push_constant) uniform Push { AttentionHeadsPush p; };

void main() {
  const uint e = gl_GlobalInvocationID.x;  // t * HS + d
  if (e >= p.T * p.HS) return;
  const uint bh = gl_WorkGroupID.y, part = gl_WorkGroupID.z;
  const uint b = bh / p.NH, h = bh % p.NH, t = e / p.HS, d = e % p.HS;
  const uint to = ((p.first + b) * p.T + t) * p.row + (part * p.NH + h) * p.HS + d;
  const float v = heads[part * p.part_stride + bh * p.T * p.HS + e];
  tokens[to] = ACCUMULATE ? tokens[to] + v : v;
}
