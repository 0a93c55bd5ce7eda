#version 450
// da += dy and db += dy: both branches of a residual receive the whole gradient.
// dy, da, db: (n)
// VEC4: four elements per invocation, as in relu_forward.comp.
#extension GL_GOOGLE_include_directive : require
#include "elementwise.h"

layout(local_size_x = BRIGADE_WG_ELEMENTWISE) in;
layout(constant_id = 0) const bool VEC4 = false;
layout(binding = 0) readonly buffer DY { float dy[]; };
layout(binding = 0) readonly buffer DY4 { vec4 dy4[]; };
layout(binding = 1) buffer DA { float da[]; };
layout(binding = 1) buffer DA4 { vec4 da4[]; };
layout(binding = 2) buffer DB { float db[]; };
layout(binding = 2) buffer DB4 { vec4 db4[]; };
layout(push_constant) uniform Push { ElementwisePush p; };

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (VEC4) {
    for (uint i = gl_GlobalInvocationID.x; i < p.n / 4; i += stride) {
      const vec4 g = dy4[i];
      da4[i] += g;
      db4[i] += g;
    }
    return;
  }
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
    const float g = dy[i];
    da[i] += g;
    db[i] += g;
  }
}
