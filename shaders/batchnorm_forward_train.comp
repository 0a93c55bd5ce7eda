#version 450
// BatchNorm2d training forward, one workgroup per channel: normalizes with this
// micro-batch's own statistics (biased variance, as PyTorch normalizes), saves mean and
// rstd for backward, and when p.accumulate is set merges the statistics into the
// mini-batch accumulator that batchnorm_update_running consumes.
// x, y: (N, C, HW)  weight, bias, mean, rstd: (C)  stats: (C) BatchNormStats
// x and y may be stored in 16 bits (shaders/formats.glsl); the statistics and every sum stay
// fp32, summed in the same order whatever the formats, so a 16-bit x gives the fp32 kernel's
// statistics on its values, and a 16-bit y their pack.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "norm.h"
#include "workgroup_reduce.h"
#include "formats.glsl"

layout(local_size_x_id = 0) in;
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 0) readonly buffer XW { uint xw[]; };
layout(binding = 1) readonly buffer Weight { float weight[]; };
layout(binding = 2) readonly buffer Bias { float bias[]; };
layout(binding = 3) writeonly buffer Y { float y[]; };
layout(binding = 3) writeonly buffer YW { uint yw[]; };
layout(binding = 4) writeonly buffer Mean { float mean_out[]; };
layout(binding = 5) writeonly buffer Rstd { float rstd_out[]; };
layout(binding = 6) buffer Stats { BatchNormStats stats[]; };
layout(push_constant) uniform Push { BatchNormPush p; };

// How x and y are stored. A 16-bit y is written a word (two neighbours of a plane) at a time:
// only where H * W is even (the launcher proves it), so no word holds two channels.
BRIGADE_FORMAT(1, FORMAT_X);
BRIGADE_FORMAT(2, FORMAT_Y);

float x_at(uint i) {
  if (FORMAT_X == BRIGADE_FORMAT_FP32) return x[i];
  return half_in(xw[i >> 1], i, FORMAT_X);
}
// Elements i and i + 1, i even.
vec2 x_pair(uint i) {
  if (FORMAT_X == BRIGADE_FORMAT_FP32) return vec2(x[i], x[i + 1]);
  return pair_in(xw[i >> 1], FORMAT_X);
}

// Flat index k over the channel's N * HW values -> offset in the NCHW tensor.
uint offset(uint c, uint k) {
  return ((k / p.spatial) * p.channels + c) * p.spatial + k % p.spatial;
}

void main() {
  const uint lane = gl_LocalInvocationID.x, width = gl_WorkGroupSize.x;
  const uint count = p.batch * p.spatial;
  for (uint c = gl_WorkGroupID.x; c < p.channels; c += gl_NumWorkGroups.x) {
    float sum = 0.0;
    for (uint k = lane; k < count; k += width) sum += x_at(offset(c, k));
    const float mean = workgroup_sum(sum) / float(count);
    float squares = 0.0;
    for (uint k = lane; k < count; k += width) {
      const float d = x_at(offset(c, k)) - mean;
      squares += d * d;
    }
    const float m2 = workgroup_sum(squares);
    const float rstd = inversesqrt(m2 / float(count) + p.eps);
    const float w = weight[c], b = bias[c];
    if (FORMAT_Y == BRIGADE_FORMAT_FP32)
      for (uint k = lane; k < count; k += width) {
        const uint i = offset(c, k);
        y[i] = (x_at(i) - mean) * rstd * w + b;
      }
    else
      for (uint k = 2 * lane; k < count; k += 2 * width) {
        const uint i = offset(c, k);  // even, as H * W is
        const vec2 v = x_pair(i);
        yw[i >> 1] = pair_out((v.x - mean) * rstd * w + b, (v.y - mean) * rstd * w + b, FORMAT_Y);
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
