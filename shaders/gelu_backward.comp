#version 450
// dx += dy * gelu'(x), tanh approximation (the derivative PyTorch's gelu_backward uses).
// x, dy, dx: (n)
#extension GL_GOOGLE_include_directive : require
#include "elementwise.h"
#include "gelu.glsl"

layout(local_size_x = BRIGADE_WG_ELEMENTWISE) in;
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer DY { float dy[]; };
layout(binding = 2) buffer DX { float dx[]; };
layout(push_constant) uniform Push { ElementwisePush p; };

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
    dx[i] += dy[i] * gelu_grad(x[i]);
  }
}
