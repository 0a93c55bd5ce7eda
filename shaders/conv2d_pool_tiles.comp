#version 450
// The 2x2 pooling of a Conv2d taking its ReLU and pooling where the convolution runs in
// tiles (ops/conv2d_pool.h): codes one word per TILE x TILE tile of the convolution's output
// and channel, four bits a whole window of the tile in row-major order (as
// conv2d_winograd_output's POOL mode writes them).
//   MODE 0, pool:    dense (N, C, OH, OW) -> y (N, C, OH / 2, OW / 2) and the codes
//   MODE 1, unpool:  dy (N, C, OH / 2, OW / 2) and the codes -> dense, written whole: each dy
//                    at the element its code names, 0 elsewhere (the last row or column of an
//                    odd side included)
// One invocation per tile of one plane (n * C + c, of `planes` in all, on the grid's z).
#extension GL_GOOGLE_include_directive : require
#include "conv.h"
#include "relu.glsl"
#include "pooling.glsl"

layout(local_size_x = BRIGADE_WG_CONV) in;
layout(constant_id = 0) const uint OH = 2;
layout(constant_id = 1) const uint OW = 2;
layout(constant_id = 2) const uint TILE = 4;
layout(constant_id = 3) const uint MODE = 0;

layout(binding = 0) buffer Dense { float dense[]; };
layout(binding = 0) buffer Dense2 { vec2 dense2[]; };
layout(binding = 1) buffer Pooled { float pooled_[]; };
layout(binding = 2) buffer Codes { uint codes[]; };
layout(push_constant) uniform Push { uint planes; };

const uint POH = OH / 2u, POW = OW / 2u, HALF = TILE / 2u;
const uint TW = (OW + TILE - 1u) / TILE, TILES = ((OH + TILE - 1u) / TILE) * TW;

void tiles_plane(uint plane) {
  const uint tile = gl_GlobalInvocationID.x;
  if (tile >= TILES) return;
  const uint oh = (tile / TW) * TILE, ow = (tile % TW) * TILE;
  const uint at = plane * OH * OW;
  if (MODE == 0u) {
    uint word = 0u;
    for (uint wy = 0u; wy < HALF; ++wy)
      for (uint wx = 0u; wx < HALF; ++wx) {
        const uint py = oh / 2u + wy, px = ow / 2u + wx;
        if (py >= POH || px >= POW) continue;
        const uint e = at + 2u * py * OW + 2u * px;
        uint code;
        pooled_[(plane * POH + py) * POW + px] = pooled(vec4(dense[e], dense[e + 1u], dense[e + OW], dense[e + OW + 1u]), code);
        word |= code << (4u * (wy * HALF + wx));
      }
    codes[plane * TILES + tile] = word;
    return;
  }
  const uint word = codes[plane * TILES + tile];
  // Element (r, k) of the tile: its window's pooled gradient where the code names it. The
  // pooled index is clamped for the elements past the last whole window (never chosen).
  for (uint r = 0u; r < TILE && oh + r < OH; ++r)
    for (uint k = 0u; k < TILE && ow + k < OW; k += 2u) {
      float v[2];
      for (uint j = 0u; j < 2u; ++j) {
        const uint py = (oh + r) / 2u, px = (ow + k + j) / 2u;
        const uint window = (r / 2u) * HALF + (k + j) / 2u, place = (r % 2u) * 2u + (k + j) % 2u;
        const bool chosen = py < POH && px < POW && ((word >> (4u * window)) & 0xFu) == place;
        const float g = pooled_[(plane * POH + min(py, POH - 1u)) * POW + min(px, POW - 1u)];
        v[j] = chosen ? g : 0.0;
      }
      const uint e = at + (oh + r) * OW + ow + k;
      if (OW % 2u == 0u) {  // a pair of a row: one vec2 (the launcher proves the alignment)
        dense2[e >> 1] = vec2(v[0], v[1]);
      } else {
        dense[e] = v[0];
        if (ow + k + 1u < OW) dense[e + 1u] = v[1];
      }
    }
}

// The grid's z walks the planes (N x C) in steps of its depth (the launcher caps it at 65535).
void main() {
  for (uint plane = gl_WorkGroupID.z; plane < planes; plane += gl_NumWorkGroups.z) tiles_plane(plane);
}
