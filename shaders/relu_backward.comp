#version 450
// dx = dy where the forward output y was positive, else 0 (PyTorch's threshold_backward on
// the saved result), written whole so the caller need not clear it.  y, dy, dx: (n)
// VEC4: four elements per invocation, as in relu_forward.comp. FORMAT_Y: how y is stored
// (shaders/formats.glsl).
#extension GL_GOOGLE_include_directive : require
#include "elementwise.h"
#include "formats.glsl"

layout(local_size_x = BRIGADE_WG_ELEMENTWISE) in;
layout(constant_id = 0) const bool VEC4 = false;
BRIGADE_FORMAT(1, FORMAT_Y);
layout(binding = 0) readonly buffer Y { float y[]; };
layout(binding = 0) readonly buffer Y4 { vec4 y4[]; };
layout(binding = 0) readonly buffer YW { uint yw[]; };
layout(binding = 0) readonly buffer YW2 { uvec2 yw2[]; };
layout(binding = 1) readonly buffer DY { float dy[]; };
layout(binding = 1) readonly buffer DY4 { vec4 dy4[]; };
layout(binding = 2) writeonly buffer DX { float dx[]; };
layout(binding = 2) writeonly buffer DX4 { vec4 dx4[]; };
layout(push_constant) uniform Push { ElementwisePush p; };

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (VEC4) {
    for (uint i = gl_GlobalInvocationID.x; i < p.n / 4; i += stride)
      dx4[i] = mix(vec4(0.0), dy4[i], greaterThan(FORMAT_Y == BRIGADE_FORMAT_FP32 ? y4[i] : quad_in(yw2[i], FORMAT_Y), vec4(0.0)));
    return;
  }
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride)
    dx[i] = (FORMAT_Y == BRIGADE_FORMAT_FP32 ? y[i] : half_in(yw[i >> 1], i, FORMAT_Y)) > 0.0 ? dy[i] : 0.0;
}
