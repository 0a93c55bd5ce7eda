#version 450
// BatchNorm2d training backward through the micro-batch statistics, one workgroup per
// channel; one kernel because the parameter gradients are the sums the input gradient
// needs. With xhat = (x - mean) * rstd and M = N * HW:
//   dbias += sum dy,  dweight += sum dy * xhat,
//   dx += weight * rstd * (dy - sum(dy) / M - xhat * sum(dy * xhat) / M)
// dy, x, dx: (N, C, HW)  weight, mean, rstd: (C) from the forward  dweight, dbias: (C)
// x may be stored in 16 bits (shaders/formats.glsl), and dx's sums rounded to a 16-bit
// precision (an input gradient kept at its input's); dy, dx and every sum stay fp32.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "norm.h"
#include "workgroup_reduce.h"
#include "formats.glsl"

layout(local_size_x_id = 0) in;
layout(binding = 0) readonly buffer DY { float dy[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer XW { uint xw[]; };
layout(binding = 2) readonly buffer Weight { float weight[]; };
layout(binding = 3) readonly buffer Mean { float mean_in[]; };
layout(binding = 4) readonly buffer Rstd { float rstd_in[]; };
layout(binding = 5) buffer DX { float dx[]; };
layout(binding = 6) buffer DWeight { float dweight[]; };
layout(binding = 7) buffer DBias { float dbias[]; };
layout(push_constant) uniform Push { BatchNormPush p; };

BRIGADE_FORMAT(1, FORMAT_X);
BRIGADE_FORMAT(2, ROUND_DX);

float x_at(uint i) {
  if (FORMAT_X == BRIGADE_FORMAT_FP32) return x[i];
  return half_in(xw[i >> 1], i, FORMAT_X);
}

uint offset(uint c, uint k) {
  return ((k / p.spatial) * p.channels + c) * p.spatial + k % p.spatial;
}

void main() {
  const uint lane = gl_LocalInvocationID.x, width = gl_WorkGroupSize.x;
  const uint count = p.batch * p.spatial;
  for (uint c = gl_WorkGroupID.x; c < p.channels; c += gl_NumWorkGroups.x) {
    const float mean = mean_in[c], rstd = rstd_in[c];
    float sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (uint k = lane; k < count; k += width) {
      const uint i = offset(c, k);
      sum_dy += dy[i];
      sum_dy_xhat += dy[i] * (x_at(i) - mean) * rstd;
    }
    sum_dy = workgroup_sum(sum_dy);
    sum_dy_xhat = workgroup_sum(sum_dy_xhat);
    if (lane == 0u) {
      dweight[c] += sum_dy_xhat;
      dbias[c] += sum_dy;
    }
    const float scale = weight[c] * rstd, mean_dy = sum_dy / float(count);
    const float mean_dy_xhat = sum_dy_xhat / float(count);
    for (uint k = lane; k < count; k += width) {
      const uint i = offset(c, k);
      dx[i] = rounded(dx[i] + scale * (dy[i] - mean_dy - (x_at(i) - mean) * rstd * mean_dy_xhat), ROUND_DX);
    }
  }
}
