#version 450
// da += dy and db += dy: both branches of a residual receive the whole gradient.
// dy, da, db: (n)
#extension GL_GOOGLE_include_directive : require
#include "elementwise.h"

layout(local_size_x = BRIGADE_WG_ELEMENTWISE) in;
layout(binding = 0) readonly buffer DY { float dy[]; };
layout(binding = 1) buffer DA { float da[]; };
layout(binding = 2) buffer DB { float db[]; };
layout(push_constant) uniform Push { ElementwisePush p; };

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
    const float g = dy[i];
    da[i] += g;
    db[i] += g;
  }
}
