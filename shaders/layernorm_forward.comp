#version 450
// LayerNorm over the last dimension, one workgroup per row (two passes over the row: the
// mean first, then squared deviations from it, which stays accurate when |mean| >> std):
//   y = (x - mean) * rstd * weight + bias,  rstd = 1 / sqrt(var + eps),  var biased.
// x, y: (N, C)  weight, bias: (C)  mean, rstd: (N), saved for the backward passes.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "norm.h"
#include "workgroup_reduce.h"

layout(local_size_x_id = 0) in;
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer Weight { float weight[]; };
layout(binding = 2) readonly buffer Bias { float bias[]; };
layout(binding = 3) writeonly buffer Y { float y[]; };
layout(binding = 4) writeonly buffer Mean { float mean_out[]; };
layout(binding = 5) writeonly buffer Rstd { float rstd_out[]; };
layout(push_constant) uniform Push { LayerNormPush p; };

void main() {
  const uint C = p.channels, lane = gl_LocalInvocationID.x, width = gl_WorkGroupSize.x;
  for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) {
    const uint base = row * C;
    float sum = 0.0;
    for (uint c = lane; c < C; c += width) sum += x[base + c];
    const float mean = workgroup_sum(sum) / float(C);
    float squares = 0.0;
    for (uint c = lane; c < C; c += width) {
      const float d = x[base + c] - mean;
      squares += d * d;
    }
    const float rstd = inversesqrt(workgroup_sum(squares) / float(C) + p.eps);
    for (uint c = lane; c < C; c += width)
      y[base + c] = (x[base + c] - mean) * rstd * weight[c] + bias[c];
    if (lane == 0u) {
      mean_out[row] = mean;
      rstd_out[row] = rstd;
    }
  }
}
