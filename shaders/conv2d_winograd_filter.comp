#version 450
// Winograd's filter transform (shaders/winograd.glsl): U = G g G^T of each 3x3 filter.
//   weight (ROWS, CHANNELS, 3, 3)  ->  U (POINTS, ROWS, CHANNELS), point-major
// One invocation per filter.
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_CONV) in;

layout(binding = 0) readonly buffer Weight { float w[]; };
layout(binding = 1) writeonly buffer U { float u[]; };
layout(push_constant) uniform Push { WinogradPush p; };
#include "winograd.glsl"

void transform_filter(uint i) {
  const uint filters = p.rows * p.channels;
  float g[3][6];  // G on each row of the filter
  for (uint r = 0; r < 3; ++r) {
    float row[6];
    for (uint k = 0; k < 3; ++k) row[k] = w[i * 9 + r * 3 + k];
    g[r] = g3(row);
  }
  for (uint col = 0; col < ALPHA; ++col) {
    const float t[6] = g3(float[6](g[0][col], g[1][col], g[2][col], 0.0, 0.0, 0.0));
    for (uint r = 0; r < ALPHA; ++r) u[(r * ALPHA + col) * filters + i] = t[r];
  }
}

// The grid is capped at 65535 workgroups (ROWS x CHANNELS filters are the model's): each
// invocation walks the filters in steps of the grid.
void main() {
  for (uint i = gl_GlobalInvocationID.x; i < p.rows * p.channels; i += gl_NumWorkGroups.x * BRIGADE_WG_CONV) transform_filter(i);
}
