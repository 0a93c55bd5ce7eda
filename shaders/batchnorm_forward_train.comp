#version 450
// BatchNorm2d training forward, one workgroup per channel: normalizes with this
// micro-batch's own statistics (biased variance, as PyTorch normalizes), saves mean and
// rstd for backward, and when p.accumulate is set merges the statistics into the
// mini-batch accumulator that batchnorm_update_running consumes.
// x, y: (N, C, HW)  weight, bias, mean, rstd: (C)  stats: (C) BatchNormStats
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
layout(binding = 6) buffer Stats { BatchNormStats stats[]; };
layout(push_constant) uniform Push { BatchNormPush p; };

// Flat index k over the channel's N * HW values -> offset in the NCHW tensor.
uint offset(uint c, uint k) {
  return ((k / p.spatial) * p.channels + c) * p.spatial + k % p.spatial;
}

void main() {
  const uint lane = gl_LocalInvocationID.x, width = gl_WorkGroupSize.x;
  const uint count = p.batch * p.spatial;
  for (uint c = gl_WorkGroupID.x; c < p.channels; c += gl_NumWorkGroups.x) {
    float sum = 0.0;
    for (uint k = lane; k < count; k += width) sum += x[offset(c, k)];
    const float mean = workgroup_sum(sum) / float(count);
    float squares = 0.0;
    for (uint k = lane; k < count; k += width) {
      const float d = x[offset(c, k)] - mean;
      squares += d * d;
    }
    const float m2 = workgroup_sum(squares);
    const float rstd = inversesqrt(m2 / float(count) + p.eps);
    const float w = weight[c], b = bias[c];
    for (uint k = lane; k < count; k += width) {
      const uint i = offset(c, k);
      y[i] = (x[i] - mean) * rstd * w + b;
    }
    if (lane == 0u) {
      mean_out[c] = mean;
      rstd_out[c] = rstd;
      if (p.accumulate != 0u) {
        const BatchNormStats a = stats[c];
        const uint n = a.count + count;
        const float delta = mean - a.mean;
        const float share = float(count) / float(n);
        stats[c] = BatchNormStats(n, a.mean + delta * share,
                                  a.m2 + m2 + delta * delta * float(a.count) * share);
      }
    }
  }
}
