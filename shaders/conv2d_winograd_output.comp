#version 450
// Winograd's output transform (shaders/winograd.glsl): each 2x2 output tile is A^T m A of
// its 16 products, for samples first .. first + count - 1.
//   M (16, C, count * TILES), point-major  ->  y (N, C, OH, OW)
// y = the tiles + bias per channel (BIAS), or with ACCUMULATE y += the tiles, rounded to
// ROUND (an input gradient kept at its tensor's precision). A 16-bit y (FORMAT_Y, OW even)
// is stored a row's pair at a time. One invocation per column of M (a sample's tile), the
// channel on y (as conv2d_winograd_input).
#extension GL_GOOGLE_include_directive : require
#include "conv.h"
#include "formats.glsl"

layout(local_size_x = BRIGADE_WG_CONV) in;
#include "conv_geometry.glsl"
#include "winograd.glsl"
BRIGADE_FORMAT(11, FORMAT_Y);
BRIGADE_FORMAT(12, ROUND);
layout(constant_id = 13) const bool BIAS = false;
layout(constant_id = 0) const bool ACCUMULATE = false;

layout(binding = 0) readonly buffer M { float m[]; };
layout(binding = 1) buffer Y { float y[]; };
layout(binding = 1) writeonly buffer YW { uint yw[]; };
layout(binding = 2) readonly buffer Bias { float bias[]; };
layout(push_constant) uniform Push { WinogradPush p; };

void put(uint at, float value) {
  y[at] = ACCUMULATE ? rounded(y[at] + value, ROUND) : value;
}

void main() {
  const uint columns = p.count * TILES, c = gl_WorkGroupID.y, zt = gl_GlobalInvocationID.x;
  if (zt >= columns) return;
  vec2 rows[4];  // A^T on each row of the tile's products
  for (uint r = 0; r < 4; ++r) {
    vec4 row;
    for (uint col = 0; col < 4; ++col) row[col] = m[point_at(r * 4 + col, c, zt, p.channels, columns)];
    rows[r] = at(row);
  }
  const float b = BIAS ? bias[c] : 0.0;
  // A^T on the columns: the left and right column of the output tile.
  const vec2 left = at(vec4(rows[0].x, rows[1].x, rows[2].x, rows[3].x)) + b;
  const vec2 right = at(vec4(rows[0].y, rows[1].y, rows[2].y, rows[3].y)) + b;
  const uint z = zt / TILES, tile = zt % TILES;
  const uint oh = (tile / TW) * 2, ow = (tile % TW) * 2;
  const uint at0 = ((p.first + z) * p.channels + c) * OH * OW + oh * OW + ow;
  if (FORMAT_Y != BRIGADE_FORMAT_FP32) {  // OW is even: each row's pair is one word
    yw[at0 >> 1] = pair_out(left.x, right.x, FORMAT_Y);
    if (oh + 1 < OH) yw[(at0 + OW) >> 1] = pair_out(left.y, right.y, FORMAT_Y);
    return;
  }
  put(at0, left.x);
  if (ow + 1 < OW) put(at0 + 1, right.x);
  if (oh + 1 < OH) {
    put(at0 + OW, left.y);
    if (ow + 1 < OW) put(at0 + OW + 1, right.y);
  }
}
