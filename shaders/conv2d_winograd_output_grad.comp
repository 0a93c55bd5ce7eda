#version 450
// The adjoint of Winograd's output transform (shaders/winograd.glsl), for the weight
// gradient: each 2x2 tile of dy, zero past the edges, becomes A e A^T, for samples
// first .. first + count - 1.
//   dy (N, C, OH, OW)  ->  dM (16, C, count * TILES), point-major
// One invocation per channel and tile, the sample on z.
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_CONV) in;
#include "conv_geometry.glsl"
#include "winograd.glsl"

layout(binding = 0) readonly buffer DY { float dy[]; };
layout(binding = 1) writeonly buffer DM { float dm[]; };
layout(push_constant) uniform Push { WinogradPush p; };

// dy at (oh, ow) of a plane, zero past the edges (a clamped load, then selected).
float grad(uint plane, uint oh, uint ow) {
  const float value = dy[plane + min(oh, OH - 1) * OW + min(ow, OW - 1)];
  return oh < OH && ow < OW ? value : 0.0;
}

void main() {
  const uint i = gl_GlobalInvocationID.x, z = gl_WorkGroupID.z;
  if (i >= p.channels * TILES) return;
  const uint c = i / TILES, tile = i % TILES;
  const uint oh = (tile / TW) * 2, ow = (tile % TW) * 2;
  const uint plane = ((p.first + z) * p.channels + c) * OH * OW;
  const vec4 left = a2(vec2(grad(plane, oh, ow), grad(plane, oh + 1, ow)));
  const vec4 right = a2(vec2(grad(plane, oh, ow + 1), grad(plane, oh + 1, ow + 1)));
  for (uint r = 0; r < 4; ++r) {
    const vec4 row = a2(vec2(left[r], right[r]));
    for (uint col = 0; col < 4; ++col) dm[point_at(r * 4 + col, c, z, tile, p.channels, p.count)] = row[col];
  }
}
