#version 450
// The adjoint of Winograd's output transform (shaders/winograd.glsl), for the weight
// gradient: each TILE x TILE tile of dy, zero past the edges, becomes A e A^T, for samples
// first .. first + count - 1.
//   dy (N, C, OH, OW)  ->  dM (POINTS, C, count * TILES), point-major
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
  vec4 points[36];  // the points of each tile q in component q
  for (uint q = 0; q < per; ++q) {
    const uint z = (zt + q) / TILES, tile = (zt + q) % TILES;
    const uint oh = (tile / TW) * TILE, ow = (tile % TW) * TILE;
    const uint plane = ((p.first + z) * p.channels + c) * OH * OW;
    float columns_[6][6];  // A on each column of the tile
    for (uint j = 0; j < TILE; ++j) {
      float column[6];
      for (uint i = 0; i < TILE; ++i) column[i] = grad(plane, oh + i, ow + j);
      columns_[j] = a_(column);
    }
    for (uint r = 0; r < ALPHA; ++r) {
      float row[6];
      for (uint j = 0; j < TILE; ++j) row[j] = columns_[j][r];
      const float t[6] = a_(row);
      for (uint k = 0; k < ALPHA; ++k) points[r * ALPHA + k][q] = t[k];
    }
  }
  for (uint pt = 0; pt < POINTS; ++pt) {
    const uint at = point_at(pt, c, zt, p.channels, columns);
    if (QUADS) dm4[at >> 2] = points[pt];
    else dm[at] = points[pt].x;
  }
}
