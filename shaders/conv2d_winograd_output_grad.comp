#version 450
// The adjoint of Winograd's output transform (shaders/winograd.glsl), for the weight
// gradient: each TILE x TILE tile of dy, zero past the edges, becomes A e A^T, for samples
// first .. first + count - 1.
//   dy (N, C, OH, OW)  ->  dM (POINTS, C, count * TILES), point-major
// With POOL, dy is the gradient of the ReLU and 2x2 pooling the forward's output transform
// took (ops/conv2d_pool.h): (N, C, OH / 2, OW / 2) and the codes that transform wrote, one
// word per tile and channel; the convolution's output gradient is read through them, each
// pooled gradient at the element its window's code names (shaders/conv2d_pool_tiles.comp's
// spreading back, never stored).
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

layout(constant_id = 16) const bool POOL = false;
layout(binding = 0) readonly buffer DY { float dy[]; };
layout(binding = 1) writeonly buffer DM { float dm[]; };
layout(binding = 1) writeonly buffer DM4 { vec4 dm4[]; };
layout(binding = 2) readonly buffer Codes { uint codes[]; };
layout(push_constant) uniform Push { WinogradPush p; };

const uint POH = OH / 2u, POW = OW / 2u, HALF = TILE / 2u;

// The output gradient at (oh, ow) of plane `plane` (sample * C + channel), zero past the
// edges (a clamped load, then selected); with POOL, element (i, j) of its tile, whose code
// word is `word`.
float grad(uint plane, uint oh, uint ow, uint word, uint i, uint j) {
  if (POOL) {
    const uint py = oh / 2u, px = ow / 2u, window = (i / 2u) * HALF + j / 2u, place = (i % 2u) * 2u + j % 2u;
    const float value = dy[(plane * POH + min(py, POH - 1u)) * POW + min(px, POW - 1u)];
    return py < POH && px < POW && ((word >> (4u * window)) & 0xFu) == place ? value : 0.0;
  }
  const float value = dy[plane * OH * OW + min(oh, OH - 1) * OW + min(ow, OW - 1)];
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
    const uint plane = (p.first + z) * p.channels + c;
    const uint word = POOL ? codes[plane * TILES + tile] : 0u;
    float columns_[6][6];  // A on each column of the tile
    for (uint j = 0; j < TILE; ++j) {
      float column[6];
      for (uint i = 0; i < TILE; ++i) column[i] = grad(plane, oh + i, ow + j, word, i, j);
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
