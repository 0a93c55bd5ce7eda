#version 450
// y = gelu(x), tanh approximation.  x, y: (n)
#extension GL_GOOGLE_include_directive : require
#include "elementwise.h"
#include "gelu.glsl"

layout(local_size_x = BRIGADE_WG_ELEMENTWISE) in;
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Push { ElementwisePush p; };

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
    y[i] = gelu(x[i]);
  }
}
