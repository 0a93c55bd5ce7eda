#version 450
// The adjoint of Winograd's input transform (shaders/winograd.glsl), for the input gradient:
// each column of dV (a sample's tile) becomes B dV B^T, the gradient of its ALPHA x ALPHA
// patch of x at stride TILE, added into dx; what falls in the padding is dropped. Patches of
// neighbouring tiles overlap by ALPHA - TILE = 2 rows and columns. One invocation per plane
// (a sample's channel) and row of tiles walks the row from the left, carrying each patch's
// last two columns into the next: no two invocations of a dispatch add into one element, and
// the rows of tiles go in two dispatches, even rows then odd (the push constant's rows), so
// the rows two patches share are added to in a fixed order. The loops' indices are the same
// in every lane. An element's last add (the odd rows' dispatch where an odd row of tiles
// covers its row, else the even rows') rounds the sum to ROUND_DX (a 16-bit input gradient's
// precision): the same bits as rounding dx after both.
//   dV (POINTS, C, count * TILES), point-major  ->  dx (N, C, H, W) +=
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_CONV) in;
#include "conv_geometry.glsl"
#include "winograd.glsl"
#include "formats.glsl"

BRIGADE_FORMAT(11, ROUND_DX);

layout(binding = 0) readonly buffer DV { float dv[]; };
layout(binding = 1) buffer DX { float dx[]; };
layout(push_constant) uniform Push { WinogradPush p; };

// Whether an odd row of tiles covers row y of x: rows ti with ti TILE - PH <= y <= ti TILE - PH
// + ALPHA - 1.
bool odd_row_covers(int y) {
  const int from = y + int(PH) - int(ALPHA) + 1;
  const int lo = from <= 0 ? 0 : (from + int(TILE) - 1) / int(TILE), hi = min(int(TH) - 1, (y + int(PH)) / int(TILE));
  return lo <= hi && (lo % 2 == 1 || lo + 1 <= hi);
}

void main() {
  const uint rows_ = (TH + 1u - p.rows) / 2u;  // this dispatch's rows of tiles
  const uint i = gl_GlobalInvocationID.x;
  if (i >= p.count * p.channels * rows_) return;
  const uint ti = p.rows + 2u * (i / (p.count * p.channels)), zc = i % (p.count * p.channels);
  const uint z = zc / p.channels, c = zc % p.channels, columns = p.count * TILES;
  const uint plane = ((p.first + z) * p.channels + c) * H * W;
  const int ih = int(ti * TILE) - int(PH);
  bool last_add[6];  // whether this dispatch adds last into the patch's row r, which then rounds
  for (uint r = 0; r < ALPHA; ++r) last_add[r] = p.rows == 1u || !odd_row_covers(ih + int(r));
  float carry[6][2];
  for (uint r = 0; r < ALPHA; ++r) carry[r][0] = carry[r][1] = 0.0;
  for (uint tj = 0; tj < TW; ++tj) {
    const uint zt = z * TILES + ti * TW + tj;
    float rows[6][6];  // B on each row of the tile's points
    for (uint r = 0; r < ALPHA; ++r) {
      float row[6];
      for (uint q = 0; q < ALPHA; ++q) row[q] = dv[point_at(r * ALPHA + q, c, zt, p.channels, columns)];
      rows[r] = b_(row);
    }
    const bool last = tj + 1u == TW;
    const int iw = int(tj * TILE) - int(PW);
    for (uint col = 0; col < ALPHA; ++col) {  // B on the columns
      float column[6];
      for (uint r = 0; r < ALPHA; ++r) column[r] = rows[r][col];
      float t[6] = b_(column);
      if (col < 2u)
        for (uint r = 0; r < ALPHA; ++r) t[r] += carry[r][col];
      if (col >= TILE && !last) {  // the next patch's first two columns
        for (uint r = 0; r < ALPHA; ++r) carry[r][col - TILE] = t[r];
        continue;
      }
      const int ix = iw + int(col);
      if (ix < 0 || ix >= int(W)) continue;
      for (uint r = 0; r < ALPHA; ++r) {
        const int iy = ih + int(r);
        if (iy < 0 || iy >= int(H)) continue;
        const uint at = plane + uint(iy) * W + uint(ix);
        dx[at] = last_add[r] ? rounded(dx[at] + t[r], ROUND_DX) : dx[at] + t[r];
      }
    }
  }
}
