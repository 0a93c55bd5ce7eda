#version 450
// The adjoint of Winograd's filter transform (shaders/winograd.glsl), for the weight
// gradient: dweight += G^T dU G of each filter's 16 summed products.
//   dU (16, ROWS, CHANNELS), point-major  ->  dweight (ROWS, CHANNELS, 3, 3), accumulated
// One invocation per filter.
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_CONV) in;

layout(binding = 0) readonly buffer DU { float du[]; };
layout(binding = 1) buffer DW { float dw[]; };
layout(push_constant) uniform Push { WinogradPush p; };
#include "winograd.glsl"

void main() {
  const uint i = gl_GlobalInvocationID.x, filters = p.rows * p.channels;
  if (i >= filters) return;
  vec3 rows[4];  // G on the right of each row of the tile
  for (uint r = 0; r < 4; ++r) {
    vec4 row;
    for (uint col = 0; col < 4; ++col) row[col] = du[(r * 4 + col) * filters + i];
    rows[r] = gt(row);
  }
  for (uint col = 0; col < 3; ++col) {
    const vec3 t = gt(vec4(rows[0][col], rows[1][col], rows[2][col], rows[3][col]));
    for (uint r = 0; r < 3; ++r) dw[i * 9 + r * 3 + col] += t[r];
  }
}
