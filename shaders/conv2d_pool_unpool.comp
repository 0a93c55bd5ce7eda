#version 450
// The pooling's backward in a Conv2d, ReLU and max pooling fold (ops/conv2d_pool.h): the
// gradient of the convolution's output, written whole,
//   dconv (N, OC, OH, OW) = each pooled dy at the element its code names, 0 elsewhere,
// from dy (N, OC, OH / 2, OW / 2) and the forward's codes (conv2d_pool_forward.comp).
// One invocation per pair of pooled outputs of one channel: two rows of four elements, each
// stored as one vec4 (OW % 4 == 0, the launcher proves the alignment).
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_CONV) in;
layout(constant_id = 0) const uint OH = 2;
layout(constant_id = 1) const uint OW = 4;
layout(constant_id = 2) const uint OC = 4;

layout(binding = 0) readonly buffer DY2 { vec2 dy2[]; };
layout(binding = 1) readonly buffer Codes { uint codes[]; };
layout(binding = 2) writeonly buffer D4 { vec4 dconv4[]; };
layout(push_constant) uniform Push { Conv2dPush p; };

const uint POH = OH / 2u, POW = OW / 2u, PAIRS = POW / 2u;

void unpool_plane(uint plane) {  // plane = n * OC + oc
  const uint i = gl_GlobalInvocationID.x;
  if (i >= POH * PAIRS) return;
  const uint py = i / PAIRS, pair = i % PAIRS, n = plane / OC, oc = plane % OC;
  const vec2 g = dy2[((plane * POH + py) * POW + 2u * pair) >> 1];
  const uint code = (codes[((n * POH + py) * PAIRS + pair) * (OC / 4u) + oc / 4u] >> (8u * (oc % 4u))) & 0xFFu;
  // Selects, not an indexed write: a CPU driver would spill a per-lane index to memory.
  const uint lo = code & 0xFu, hi = code >> 4u;
  const vec4 top = vec4(lo == 0u ? g.x : 0.0, lo == 1u ? g.x : 0.0, hi == 0u ? g.y : 0.0, hi == 1u ? g.y : 0.0);
  const vec4 bottom = vec4(lo == 2u ? g.x : 0.0, lo == 3u ? g.x : 0.0, hi == 2u ? g.y : 0.0, hi == 3u ? g.y : 0.0);
  const uint at = ((plane * OH + 2u * py) * OW + 4u * pair) >> 2;
  dconv4[at] = top;
  dconv4[at + OW / 4u] = bottom;
}

// The grid's z walks the planes (N x OC) in steps of its depth (the launcher caps it at 65535).
void main() {
  for (uint plane = gl_WorkGroupID.z; plane < p.n * OC; plane += gl_NumWorkGroups.z) unpool_plane(plane);
}
