#version 450
// The adjoint of Winograd's input transform (shaders/winograd.glsl), for the input gradient:
// each column of dV (a sample's tile) becomes B dV B^T, added into the tile's ALPHA x ALPHA
// patch of dx at stride TILE, what falls in the padding dropped. Neighbouring tiles' patches
// overlap (ALPHA > TILE), tiles two apart do not: a dispatch takes the tiles of one phase,
// (tile row % 2, tile column % 2) = (phase / 2, phase % 2), so no two of its invocations add
// into one element, and four dispatches in a fixed order add every tile's share.
//   dV (POINTS, C, count * TILES), point-major  ->  dx (N, C, H, W) +=
// One invocation per tile of the phase (the push constant's rows), the channel on y.
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_CONV) in;
#include "conv_geometry.glsl"
#include "winograd.glsl"

layout(binding = 0) readonly buffer DV { float dv[]; };
layout(binding = 1) buffer DX { float dx[]; };
layout(push_constant) uniform Push { WinogradPush p; };

void main() {
  const uint pi = p.rows / 2u, pj = p.rows % 2u;
  const uint ni = (TH + 1u - pi) / 2u, nj = (TW + 1u - pj) / 2u, per = ni * nj;  // the phase's tiles a sample
  const uint k = gl_GlobalInvocationID.x, c = gl_WorkGroupID.y;
  if (k >= p.count * per) return;
  const uint z = k / per, ti = pi + 2u * ((k % per) / nj), tj = pj + 2u * ((k % per) % nj);
  const uint columns = p.count * TILES, zt = z * TILES + ti * TW + tj;
  float rows[6][6];  // B on each row of the tile's points
  for (uint r = 0; r < ALPHA; ++r) {
    float row[6];
    for (uint q = 0; q < ALPHA; ++q) row[q] = dv[point_at(r * ALPHA + q, c, zt, p.channels, columns)];
    rows[r] = b_(row);
  }
  const int ih = int(ti * TILE) - int(PH), iw = int(tj * TILE) - int(PW);
  const uint plane = ((p.first + z) * p.channels + c) * H * W;
  // B on the columns: column col of the patch, added where it lies in the planes.
  for (uint col = 0; col < ALPHA; ++col) {
    const int ix = iw + int(col);
    if (ix < 0 || ix >= int(W)) continue;
    float column[6];
    for (uint r = 0; r < ALPHA; ++r) column[r] = rows[r][col];
    const float t[6] = b_(column);
    for (uint r = 0; r < ALPHA; ++r) {
      const int iy = ih + int(r);
      if (iy >= 0 && iy < int(H)) dx[plane + uint(iy) * W + uint(ix)] += t[r];
    }
  }
}
