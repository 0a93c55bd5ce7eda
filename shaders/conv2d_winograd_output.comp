#version 450
// Winograd's output transform (shaders/winograd.glsl): each TILE x TILE output tile is
// A^T m A of its POINTS products, for samples first .. first + count - 1.
//   M (POINTS, C, count * TILES), point-major  ->  y (N, C, OH, OW)
// y = the tiles + bias per channel (BIAS), or with ACCUMULATE y += the tiles, rounded to
// ROUND (an input gradient kept at its tensor's precision). A 16-bit y (FORMAT_Y, OW even)
// is stored two of a row at a time. One invocation per column of M (a sample's tile), the
// channel on y (as conv2d_winograd_input).
// POOL (the forward of a Conv2d taking its ReLU and 2x2 pooling, ops/conv2d_pool.h; fp32 y):
// the tile's whole 2x2 windows pooled through the ReLU into y (N, C, OH / 2, OW / 2), and
// their codes (shaders/pooling.glsl) into one word per tile and channel, four bits a window
// in row-major order: codes[(n * C + c) * TILES + tile].
#extension GL_GOOGLE_include_directive : require
#include "conv.h"
#include "formats.glsl"
#include "relu.glsl"
#include "pooling.glsl"

layout(local_size_x = BRIGADE_WG_CONV) in;
#include "conv_geometry.glsl"
#include "winograd.glsl"
BRIGADE_FORMAT(11, FORMAT_Y);
BRIGADE_FORMAT(12, ROUND);
layout(constant_id = 13) const bool BIAS = false;
layout(constant_id = 0) const bool ACCUMULATE = false;
layout(constant_id = 14) const bool POOL = false;

layout(binding = 0) readonly buffer M { float m[]; };
layout(binding = 1) buffer Y { float y[]; };
layout(binding = 1) writeonly buffer YW { uint yw[]; };
layout(binding = 2) readonly buffer Bias { float bias[]; };
layout(binding = 3) writeonly buffer Codes { uint codes[]; };
layout(push_constant) uniform Push { WinogradPush p; };

void put(uint at, float value) {
  y[at] = ACCUMULATE ? rounded(y[at] + value, ROUND) : value;
}

void main() {
  const uint columns = p.count * TILES, c = gl_WorkGroupID.y, zt = gl_GlobalInvocationID.x;
  if (zt >= columns) return;
  float rows[6][6];  // A^T on each row of the tile's products
  for (uint r = 0; r < ALPHA; ++r) {
    float row[6];
    for (uint k = 0; k < ALPHA; ++k) row[k] = m[point_at(r * ALPHA + k, c, zt, p.channels, columns)];
    rows[r] = at(row);
  }
  const float b = BIAS ? bias[c] : 0.0;
  const uint z = zt / TILES, tile = zt % TILES;
  const uint oh = (tile / TW) * TILE, ow = (tile % TW) * TILE;
  const uint base = ((p.first + z) * p.channels + c) * OH * OW + oh * OW + ow;
  // A^T on the columns: column j of the output tile, then stored.
  float out_[6][6];
  for (uint j = 0; j < TILE; ++j) {
    float column[6];
    for (uint r = 0; r < ALPHA; ++r) column[r] = rows[r][j];
    out_[j] = at(column);
  }
  if (POOL) {
    const uint POH = OH / 2u, POW = OW / 2u, half_tile = TILE / 2u;
    const uint plane = (p.first + z) * p.channels + c;
    uint word = 0u;
    for (uint wy = 0u; wy < half_tile; ++wy)
      for (uint wx = 0u; wx < half_tile; ++wx) {
        const uint py = oh / 2u + wy, px = ow / 2u + wx;
        if (py >= POH || px >= POW) continue;
        uint code;
        const vec4 v = vec4(out_[2u * wx][2u * wy], out_[2u * wx + 1u][2u * wy], out_[2u * wx][2u * wy + 1u],
                            out_[2u * wx + 1u][2u * wy + 1u]) + b;
        y[(plane * POH + py) * POW + px] = pooled(v, code);
        word |= code << (4u * (wy * half_tile + wx));
      }
    codes[plane * TILES + tile] = word;
    return;
  }
  for (uint i = 0; i < TILE && oh + i < OH; ++i) {
    const uint at0 = base + i * OW;
    if (FORMAT_Y != BRIGADE_FORMAT_FP32) {  // OW is even: two of a row are one word
      for (uint j = 0; j < TILE && ow + j < OW; j += 2)
        yw[(at0 + j) >> 1] = pair_out(out_[j][i] + b, out_[j + 1][i] + b, FORMAT_Y);
      continue;
    }
    for (uint j = 0; j < TILE && ow + j < OW; ++j) put(at0 + j, out_[j][i] + b);
  }
}
