#version 450
// x[i] *= alpha for i < n: gradient clipping applied in place, for callers that do not
// fold the clip coefficient into the optimizer step.  x: (n)
#extension GL_GOOGLE_include_directive : require
#include "optim.h"

layout(local_size_x = BRIGADE_WG_OPTIM) in;
layout(binding = 0) buffer X { float x[]; };
layout(push_constant) uniform Push { ScalePush p; };

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;  // the launcher caps the groups
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) x[i] *= p.alpha;
}
