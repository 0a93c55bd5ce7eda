#version 450
// Winograd's input transform (shaders/winograd.glsl): V = B^T d B of every ALPHA x ALPHA
// patch at stride TILE of x's samples first .. first + count - 1, zero in the padding.
//   x (N, C, H, W)  ->  V (POINTS, C, count * TILES), point-major
// One invocation per column of V (a sample's tile), the channel on y. (Four columns an
// invocation, stored as vec4s, measured slower on lavapipe: its loads of x dominate.)
// FORMAT_X: how x is stored (shaders/formats.glsl).
#extension GL_GOOGLE_include_directive : require
#include "conv.h"
#include "formats.glsl"

layout(local_size_x = BRIGADE_WG_CONV) in;
#include "conv_geometry.glsl"
#include "winograd.glsl"
BRIGADE_FORMAT(11, FORMAT_X);

layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 0) readonly buffer XW { uint xw[]; };
layout(binding = 1) writeonly buffer V { float v[]; };
layout(push_constant) uniform Push { WinogradPush p; };
#include "conv_tap.glsl"

void main() {
  const uint columns = p.count * TILES, c = gl_WorkGroupID.y, zt = gl_GlobalInvocationID.x;
  if (zt >= columns) return;
  const uint z = zt / TILES, tile = zt % TILES;
  const int ih = int((tile / TW) * TILE) - int(PH), iw = int((tile % TW) * TILE) - int(PW);
  const uint plane = ((p.first + z) * p.channels + c) * H * W;
  float d[6][6];  // B^T on each row of the patch
  for (uint r = 0; r < ALPHA; ++r) {
    float row[6];
    for (uint k = 0; k < ALPHA; ++k) row[k] = tap(plane, ih + int(r), iw + int(k));
    d[r] = bt(row);
  }
  // The rows are done; B^T on the columns.
  for (uint col = 0; col < ALPHA; ++col) {
    float column[6];
    for (uint r = 0; r < ALPHA; ++r) column[r] = d[r][col];
    const float t[6] = bt(column);
    for (uint r = 0; r < ALPHA; ++r) v[point_at(r * ALPHA + col, c, zt, p.channels, columns)] = t[r];
  }
}
