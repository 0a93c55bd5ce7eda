#version 450
// The adjoint of Winograd's filter transform (shaders/winograd.glsl), for the weight
// gradient: dweight += G^T dU G of each filter's POINTS summed products.
//   dU (POINTS, ROWS, CHANNELS), point-major  ->  dweight (ROWS, CHANNELS, 3, 3), accumulated
// One invocation per filter.
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_CONV) in;

layout(binding = 0) readonly buffer DU { float du[]; };
layout(binding = 1) buffer DW { float dw[]; };
layout(push_constant) uniform Push { WinogradPush p; };
#include "winograd.glsl"

void filter_gradient(uint i) {
  const uint filters = p.rows * p.channels;
  float rows[6][6];  // G on the right of each row of the tile
  for (uint r = 0; r < ALPHA; ++r) {
    float row[6];
    for (uint k = 0; k < ALPHA; ++k) row[k] = du[(r * ALPHA + k) * filters + i];
    rows[r] = gt(row);
  }
  for (uint col = 0; col < 3; ++col) {
    float column[6];
    for (uint r = 0; r < ALPHA; ++r) column[r] = rows[r][col];
    const float t[6] = gt(column);
    for (uint r = 0; r < 3; ++r) dw[i * 9 + r * 3 + col] += t[r];
  }
}

// The grid is capped at 65535 workgroups (ROWS x CHANNELS filters are the model's): each
// invocation walks the filters in steps of the grid.
void main() {
  for (uint i = gl_GlobalInvocationID.x; i < p.rows * p.channels; i += gl_NumWorkGroups.x * BRIGADE_WG_CONV) filter_gradient(i);
}
