#version 450
// Linear's bias, added after the matmul: y[n][o] += bias[o].  bias: (OUT)  y: (N,OUT)
#extension GL_GOOGLE_include_directive : require
#include "matmul.h"

layout(local_size_x = BRIGADE_WG_LINEAR_BIAS) in;
layout(binding = 0) readonly buffer Bias { float bias[]; };
layout(binding = 1) buffer Y { float y[]; };
layout(push_constant) uniform Push { LinearBiasPush p; };

void main() {
  // One invocation per element of y, counted across rows of workgroups (a dispatch has
  // at most 65535 along x).
  const uint i = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x + gl_GlobalInvocationID.x;
  if (i < p.rows * p.features) y[i] += bias[i % p.features];
}
