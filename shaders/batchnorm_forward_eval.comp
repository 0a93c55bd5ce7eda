#version 450
// BatchNorm2d evaluation forward: normalizes with the running statistics.
//   y = (x - running_mean) / sqrt(running_var + eps) * weight + bias
// x, y: (N, C, HW)  weight, bias, running_mean, running_var: (C)
#extension GL_GOOGLE_include_directive : require
#include "norm.h"

layout(local_size_x = BRIGADE_WG_NORM) in;
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer Weight { float weight[]; };
layout(binding = 2) readonly buffer Bias { float bias[]; };
layout(binding = 3) readonly buffer RunningMean { float running_mean[]; };
layout(binding = 4) readonly buffer RunningVar { float running_var[]; };
layout(binding = 5) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Push { BatchNormPush p; };

void main() {
  const uint n = p.batch * p.channels * p.spatial;
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < n; i += stride) {
    const uint c = (i / p.spatial) % p.channels;
    y[i] = (x[i] - running_mean[c]) * inversesqrt(running_var[c] + p.eps) * weight[c] + bias[c];
  }
}
