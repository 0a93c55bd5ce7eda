#version 450
// Winograd's input transform (shaders/winograd.glsl): V = B^T d B of every ALPHA x ALPHA
// patch at stride TILE of x's samples first .. first + count - 1, zero in the padding.
//   x (N, C, H, W)  ->  V (POINTS, C, count * TILES), point-major
// One invocation per row of tiles of a sample, the channel on y: it walks the row from the
// left, and neighbouring patches share ALPHA - TILE = 2 columns, so each tile after the first
// loads only its TILE new columns. (Four columns an invocation, stored as vec4s, measured
// slower on lavapipe: its loads of x dominate.)
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
  const uint columns = p.count * TILES, c = gl_WorkGroupID.y, k = gl_GlobalInvocationID.x;
  if (k >= p.count * TH) return;
  const uint z = k / TH, ti = k % TH;
  const int ih = int(ti * TILE) - int(PH);
  const uint plane = ((p.first + z) * p.channels + c) * H * W;
  float win[6][6];  // the tile's input patch, rows by columns
  for (uint r = 0; r < ALPHA; ++r)
    for (uint q = 0; q < ALPHA - TILE; ++q) win[r][q] = tap(plane, ih + int(r), int(q) - int(PW));
  for (uint tj = 0; tj < TW; ++tj) {
    const int iw = int(tj * TILE) - int(PW);
    for (uint r = 0; r < ALPHA; ++r)  // the columns this patch adds to the last one's
      for (uint q = ALPHA - TILE; q < ALPHA; ++q) win[r][q] = tap(plane, ih + int(r), iw + int(q));
    const uint zt = z * TILES + ti * TW + tj;
    float d[6][6];  // B^T on each row of the patch
    for (uint r = 0; r < ALPHA; ++r) {
      float row[6];
      for (uint q = 0; q < ALPHA; ++q) row[q] = win[r][q];
      d[r] = bt(row);
    }
    // The rows are done; B^T on the columns.
    for (uint col = 0; col < ALPHA; ++col) {
      float column[6];
      for (uint r = 0; r < ALPHA; ++r) column[r] = d[r][col];
      const float t[6] = bt(column);
      for (uint r = 0; r < ALPHA; ++r) v[point_at(r * ALPHA + col, c, zt, p.channels, columns)] = t[r];
    }
    for (uint r = 0; r < ALPHA; ++r)  // the shared columns start the next patch
      for (uint q = 0; q < ALPHA - TILE; ++q) win[r][q] = win[r][q + TILE];
  }
}
