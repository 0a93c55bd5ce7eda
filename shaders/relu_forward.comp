#version 450
// y = relu(x), NaN passing through as in PyTorch (relu.glsl).  x, y: (n)
// With VEC4 (the launcher proved n % 4 == 0 and 16-byte aligned views) each invocation
// handles four elements with one vector load and store: on CPU devices a scalar load
// whose address differs between lanes costs a loop over the lanes, so this moves a
// quarter of the loads.
#extension GL_GOOGLE_include_directive : require
#include "elementwise.h"
#include "relu.glsl"

layout(local_size_x = BRIGADE_WG_ELEMENTWISE) in;
layout(constant_id = 0) const bool VEC4 = false;
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(binding = 1) writeonly buffer Y { float y[]; };
layout(binding = 1) writeonly buffer Y4 { vec4 y4[]; };
layout(push_constant) uniform Push { ElementwisePush p; };

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (VEC4) {
    for (uint i = gl_GlobalInvocationID.x; i < p.n / 4; i += stride) {
      const vec4 v = x4[i];
      y4[i] = relu(v);
    }
    return;
  }
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) y[i] = relu(x[i]);
}
