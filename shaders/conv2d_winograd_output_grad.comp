#version 450
// The adjoint of Winograd's output transform (shaders/winograd.glsl), for the weight
// gradient: each 2x2 tile of dy, zero past the edges, becomes A e A^T, for samples
// first .. first + count - 1.
//   dy (N, C, OH, OW)  ->  dM (16, C, count * TILES), point-major
// One invocation per column of dM (a sample's tile), or per four consecutive columns with
// QUADS (count * TILES % 4 == 0, dM 16-byte aligned), stored as one vec4 per point; the
// channel on y. (Its stores dominate: four columns an invocation measured faster on
// lavapipe, where the other transforms measured slower.)
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_CONV) in;
layout(constant_id = 0) const bool QUADS = false;
#include "conv_geometry.glsl"
#include "winograd.glsl"

layout(binding = 0) readonly buffer DY { float dy[]; };
layout(binding = 1) writeonly buffer DM { float dm[]; };
layout(binding = 1) writeonly buffer DM4 { vec4 dm4[]; };
layout(push_constant) uniform Push { WinogradPush p; };

// dy at (oh, ow) of a plane, zero past the edges (a clamped load, then selected).
float grad(uint plane, uint oh, uint ow) {
  const float value = dy[plane + min(oh, OH - 1) * OW + min(ow, OW - 1)];
  return oh < OH && ow < OW ? value : 0.0;
}

void main() {
  const uint per = QUADS ? 4 : 1, columns = p.count * TILES, c = gl_WorkGroupID.y;
  const uint zt = gl_GlobalInvocationID.x * per;
  if (zt >= columns) return;
  vec4 points[16];  // the points of each tile q in component q
  for (uint q = 0; q < per; ++q) {
    const uint z = (zt + q) / TILES, tile = (zt + q) % TILES;
    const uint oh = (tile / TW) * 2, ow = (tile % TW) * 2;
    const uint plane = ((p.first + z) * p.channels + c) * OH * OW;
    const vec4 left = a2(vec2(grad(plane, oh, ow), grad(plane, oh + 1, ow)));
    const vec4 right = a2(vec2(grad(plane, oh, ow + 1), grad(plane, oh + 1, ow + 1)));
    for (uint r = 0; r < 4; ++r) {
      const vec4 row = a2(vec2(left[r], right[r]));
      for (uint col = 0; col < 4; ++col) points[r * 4 + col][q] = row[col];
    }
  }
  for (uint pt = 0; pt < 16; ++pt) {
    const uint at = point_at(pt, c, zt, p.channels, columns);
    if (QUADS) dm4[at >> 2] = points[pt];
    else dm[at] = points[pt].x;
  }
}
