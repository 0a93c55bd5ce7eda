#version 450
// BatchNorm2d evaluation forward: normalizes with the running statistics.
//   y = (x - running_mean) / sqrt(running_var + eps) * weight + bias
// x, y: (N, C, HW)  weight, bias, running_mean, running_var: (C)
// x and y may be stored in 16 bits (shaders/formats.glsl).
#extension GL_GOOGLE_include_directive : require
#include "norm.h"
#include "formats.glsl"

layout(local_size_x = BRIGADE_WG_NORM) in;
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 0) readonly buffer XW { uint xw[]; };
layout(binding = 1) readonly buffer Weight { float weight[]; };
layout(binding = 2) readonly buffer Bias { float bias[]; };
layout(binding = 3) readonly buffer RunningMean { float running_mean[]; };
layout(binding = 4) readonly buffer RunningVar { float running_var[]; };
layout(binding = 5) writeonly buffer Y { float y[]; };
layout(binding = 5) writeonly buffer YW { uint yw[]; };
layout(push_constant) uniform Push { BatchNormPush p; };

// How x and y are stored; a 16-bit y is written a word at a time, one invocation a word (the
// launcher proves the element count even).
BRIGADE_FORMAT(1, FORMAT_X);
BRIGADE_FORMAT(2, FORMAT_Y);

float x_at(uint i) {
  if (FORMAT_X == BRIGADE_FORMAT_FP32) return x[i];
  return half_in(xw[i >> 1], i, FORMAT_X);
}
// Elements 2w and 2w + 1.
vec2 x_pair(uint w) {
  if (FORMAT_X == BRIGADE_FORMAT_FP32) return vec2(x[2 * w], x[2 * w + 1]);
  return pair_in(xw[w], FORMAT_X);
}

// Element i, of value v, normalized.
float normalized(uint i, float v) {
  const uint c = (i / p.spatial) % p.channels;
  return (v - running_mean[c]) * inversesqrt(running_var[c] + p.eps) * weight[c] + bias[c];
}

void main() {
  const uint n = p.batch * p.channels * p.spatial;
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (FORMAT_Y == BRIGADE_FORMAT_FP32)
    for (uint i = gl_GlobalInvocationID.x; i < n; i += stride) y[i] = normalized(i, x_at(i));
  else
    for (uint w = gl_GlobalInvocationID.x; w < n / 2; w += stride) {
      const vec2 v = x_pair(w);
      yw[w] = pair_out(normalized(2 * w, v.x), normalized(2 * w + 1, v.y), FORMAT_Y);
    }
}
