#version 450
// Winograd's input transform (shaders/winograd.glsl): V = B^T d B of every 4x4 patch at
// stride 2 of x's samples first .. first + count - 1, zero in the padding.
//   x (N, C, H, W)  ->  V (16, C, count * TILES), point-major
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

// x at (ih, iw) of a plane, zero in the padding: loaded at a clamped address and selected,
// as conv2d_im2col does.
float tap(uint plane, int ih, int iw) {
  const bool inside = ih >= 0 && ih < int(H) && iw >= 0 && iw < int(W);
  const uint i = plane + uint(clamp(ih, 0, int(H) - 1)) * W + uint(clamp(iw, 0, int(W) - 1));
  const float value = FORMAT_X == BRIGADE_FORMAT_FP32 ? x[i] : half_in(xw[i >> 1], i, FORMAT_X);
  return inside ? value : 0.0;
}

void main() {
  const uint columns = p.count * TILES, c = gl_WorkGroupID.y, zt = gl_GlobalInvocationID.x;
  if (zt >= columns) return;
  const uint z = zt / TILES, tile = zt % TILES;
  const int ih = int((tile / TW) * 2) - int(PH), iw = int((tile % TW) * 2) - int(PW);
  const uint plane = ((p.first + z) * p.channels + c) * H * W;
  vec4 d[4];
  for (int r = 0; r < 4; ++r)
    d[r] = bt(vec4(tap(plane, ih + r, iw), tap(plane, ih + r, iw + 1), tap(plane, ih + r, iw + 2),
                   tap(plane, ih + r, iw + 3)));
  // The rows are done; B^T on the columns.
  for (uint col = 0; col < 4; ++col) {
    const vec4 t = bt(vec4(d[0][col], d[1][col], d[2][col], d[3][col]));
    for (uint r = 0; r < 4; ++r) v[point_at(r * 4 + col, c, zt, p.channels, columns)] = t[r];
  }
}
