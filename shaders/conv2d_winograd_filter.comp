#version 450
// Winograd's filter transform (shaders/winograd.glsl): U = G g G^T of each 3x3 filter.
//   weight (ROWS, CHANNELS, 3, 3)  ->  U (16, ROWS, CHANNELS), point-major
// With FLIP, the filters of the input gradient's convolution instead: g rotated by 180
// degrees and the two channel dimensions swapped, U (16, CHANNELS, ROWS).
// One invocation per filter.
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_CONV) in;
layout(constant_id = 0) const bool FLIP = false;

layout(binding = 0) readonly buffer Weight { float w[]; };
layout(binding = 1) writeonly buffer U { float u[]; };
layout(push_constant) uniform Push { WinogradPush p; };
#include "winograd.glsl"

void main() {
  const uint i = gl_GlobalInvocationID.x, filters = p.rows * p.channels;
  if (i >= filters) return;
  vec4 g[3];  // G on each row of the filter
  for (uint r = 0; r < 3; ++r) {
    const uint row = i * 9 + (FLIP ? 2 - r : r) * 3;
    g[r] = g3(FLIP ? vec3(w[row + 2], w[row + 1], w[row]) : vec3(w[row], w[row + 1], w[row + 2]));
  }
  const uint at = FLIP ? (i % p.channels) * p.rows + i / p.channels : i;
  for (uint col = 0; col < 4; ++col) {
    const vec4 t = g3(vec3(g[0][col], g[1][col], g[2][col]));
    for (uint r = 0; r < 4; ++r) u[(r * 4 + col) * filters + at] = t[r];
  }
}
