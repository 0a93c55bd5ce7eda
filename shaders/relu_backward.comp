#version 450
// dx += dy where the forward output y was positive (PyTorch's threshold_backward on the
// saved result).  y, dy, dx: (n)
#extension GL_GOOGLE_include_directive : require
#include "elementwise.h"

layout(local_size_x = BRIGADE_WG_ELEMENTWISE) in;
layout(binding = 0) readonly buffer Y { float y[]; };
layout(binding = 1) readonly buffer DY { float dy[]; };
layout(binding = 2) buffer DX { float dx[]; };
layout(push_constant) uniform Push { ElementwisePush p; };

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride)
    if (y[i] > 0.0) dx[i] += dy[i];
}
