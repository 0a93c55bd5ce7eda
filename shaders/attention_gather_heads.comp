#version 450
// Copies heads out of a token tensor into the packed heads layout (see attention.h), so a
// batched matmul can address head (b, h) at a uniform stride: a view cannot start at a head's
// columns (bound offsets must be multiples of minStorageBufferOffsetAlignment).
//   tokens (B,T,row) -> heads (parts, B,NH,T,HS)
#extension GL_GOOGLE_include_directive : require
#include "attention.h"

layout(local_size_x = BRIGADE_WG_ATTENTION_HEADS) in;

layout(binding = 0) readonly buffer Tokens { float tokens[]; };
layout(binding = 1) writeonly buffer Heads { float heads[]; };
layout(push_constant) uniform Push { AttentionHeadsPush p; };

void main() {
  const uint e = gl_GlobalInvocationID.x;  // t * HS + d
  if (e >= p.T * p.HS) return;
  const uint bh = gl_WorkGroupID.y, part = gl_WorkGroupID.z;
  const uint b = bh / p.NH, h = bh % p.NH, t = e / p.HS, d = e % p.HS;
  const uint from = ((p.first + b) * p.T + t) * p.row + (part * p.NH + h) * p.HS + d;
  heads[part * p.part_stride + bh * p.T * p.HS + e] = tokens[from];
}
