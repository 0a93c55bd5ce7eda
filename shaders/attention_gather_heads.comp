#version 450
// Copies heads out of a token tensor into the packed heads layout (see attention.h), so a
// batched matmul can address head (b, h) at a uniform stride: a view cannot start at a head's
// columns (bound offsets must be multiples of minStorageBufferOffsetAlignment).
//   tokens (B,T,row) -> heads (parts, B,NH,T,HS)
#extension GL_GOOGLE_include_directive : require
#include "attention.h"

layout(local_size_x = BRIGADE_WG_ATTENTION_HEADS) in;
layout(constant_id = BRIGADE_ATTENTION_SPEC_VEC4) const bool VEC4 = false;
const uint W = VEC4 ? 4 : 1;  // floats per invocation

layout(binding = 0) readonly buffer Tokens { float tokens[]; };
layout(binding = 0) readonly buffer Tokens4 { vec4 tokens4[]; };
layout(binding = 1) writeonly buffer Heads { float heads[]; };
layout(binding = 1) writeonly buffer Heads4 { vec4 heads4[]; };
layout(push_constant) uniform Push { AttentionHeadsPush p; };

void main() {
  const uint e = gl_GlobalInvocationID.x, hs = p.HS / W;  // e = t * hs + d / W
  if (e >= p.T * hs) return;
  const uint bh = gl_WorkGroupID.y, part = gl_WorkGroupID.z;
  const uint b = bh / p.NH, h = bh % p.NH, t = e / hs, d = e % hs * W;
  const uint from = ((p.first + b) * p.T + t) * p.row + (part * p.NH + h) * p.HS + d;
  const uint to = part * p.part_stride + (bh * p.T + t) * p.HS + d;
  if (VEC4)
    heads4[to / 4] = tokens4[from / 4];
  else
    heads[to] = tokens[from];
}
