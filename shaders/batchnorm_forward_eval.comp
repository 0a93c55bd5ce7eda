#version 450
// BatchNorm2d evaluation forward: normalizes with the running statistics.
//   y = (x - running_mean) / sqrt(running_var + eps) * weight + bias
// x, y: (N, C, HW)  weight, bias, running_mean, running_var: (C)
// x and y may be stored in 16 bits (shaders/formats.glsl). A workgroup takes a plane (n, c) at
// a time, its lanes GROUP consecutive values of it at a time (shaders/channel_walk.glsl).
#extension GL_GOOGLE_include_directive : require
#include "norm.h"
#include "formats.glsl"

layout(local_size_x = 64) in;
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(binding = 0) readonly buffer XW { uint xw[]; };
layout(binding = 0) readonly buffer XW2 { uvec2 xw2[]; };
layout(binding = 1) readonly buffer Weight { float weight[]; };
layout(binding = 2) readonly buffer Bias { float bias[]; };
layout(binding = 3) readonly buffer RunningMean { float running_mean[]; };
layout(binding = 4) readonly buffer RunningVar { float running_var[]; };
layout(binding = 5) writeonly buffer Y { float y[]; };
layout(binding = 5) writeonly buffer Y4 { vec4 y4[]; };
layout(binding = 5) writeonly buffer YW { uint yw[]; };
layout(binding = 5) writeonly buffer YW2 { uvec2 yw2[]; };
layout(push_constant) uniform Push { BatchNormPush p; };

// How x and y are stored, and the values of a plane a lane takes at a time: a 16-bit y is
// written a word (two neighbours of a plane) at a time, only where H * W is even (the launcher
// proves it), so GROUP is 2 or 4 there.
BRIGADE_FORMAT(1, FORMAT_X);
BRIGADE_FORMAT(2, FORMAT_Y);
layout(constant_id = 3) const uint GROUP = 1;
#define BRIGADE_GROUP_Y
#include "channel_walk.glsl"

void main() {
  const uint planes = p.batch * p.channels;
  for (uint plane = gl_WorkGroupID.x; plane < planes; plane += gl_NumWorkGroups.x) {
    const uint c = plane % p.channels;
    const float mean = running_mean[c], rstd = inversesqrt(running_var[c] + p.eps), w = weight[c], b = bias[c];
    for (uint s = GROUP * gl_LocalInvocationID.x; s < p.spatial; s += GROUP * gl_WorkGroupSize.x) {
      const uint i = plane * p.spatial + s;
      y_group(i, (x_group(i) - mean) * rstd * w + b);
    }
  }
}
