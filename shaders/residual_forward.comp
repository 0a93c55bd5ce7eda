#version 450
// y = a + b, the residual connection.  a, b, y: (n)
// VEC4: four elements per invocation, as in relu_forward.comp.
#extension GL_GOOGLE_include_directive : require
#include "elementwise.h"

layout(local_size_x = BRIGADE_WG_ELEMENTWISE) in;
layout(constant_id = 0) const bool VEC4 = false;
layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 0) readonly buffer A4 { vec4 a4[]; };
layout(binding = 1) readonly buffer B { float b[]; };
layout(binding = 1) readonly buffer B4 { vec4 b4[]; };
layout(binding = 2) writeonly buffer Y { float y[]; };
layout(binding = 2) writeonly buffer Y4 { vec4 y4[]; };
layout(push_constant) uniform Push { ElementwisePush p; };

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (VEC4) {
    for (uint i = gl_GlobalInvocationID.x; i < p.n / 4; i += stride) y4[i] = a4[i] + b4[i];
    return;
  }
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) y[i] = a[i] + b[i];
}
