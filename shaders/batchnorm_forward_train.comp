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
layout(binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(binding = 0) readonly buffer XW { uint xw[]; };
layout(binding = 0) readonly buffer XW2 { uvec2 xw2[]; };
layout(binding = 1) readonly buffer Weight { float weight[]; };
layout(binding = 2) readonly buffer Bias { float bias[]; };
layout(binding = 3) writeonly buffer Y { float y[]; };
layout(binding = 3) writeonly buffer Y4 { vec4 y4[]; };
layout(binding = 3) writeonly buffer YW { uint yw[]; };
layout(binding = 3) writeonly buffer YW2 { uvec2 yw2[]; };
layout(binding = 4) writeonly buffer Mean { float mean_out[]; };
layout(binding = 5) writeonly buffer Rstd { float rstd_out[]; };
layout(binding = 6) buffer Stats { BatchNormStats stats[]; };
layout(push_constant) uniform Push { BatchNormPush p; };

// How x and y are stored, and the values of a plane a lane takes at a time (GROUP,
// shaders/channel_walk.glsl). A 16-bit y is written a word (two neighbours of a plane) at a
// time: only where H * W is even (the launcher proves it), so GROUP is 2 or 4 there.
BRIGADE_FORMAT(1, FORMAT_X);
BRIGADE_FORMAT(2, FORMAT_Y);
layout(constant_id = 3) const uint GROUP = 1;
#define BRIGADE_GROUP_Y
#include "channel_walk.glsl"

void main() {
  const uint lane = gl_LocalInvocationID.x, width = gl_WorkGroupSize.x;
  const uint count = p.batch * p.spatial;
  for (uint c = gl_WorkGroupID.x; c < p.channels; c += gl_NumWorkGroups.x) {
    vec4 sum = vec4(0.0);
    for (ChannelWalk at = walk_from(lane, width); walk_inside(at); walk_next(at)) sum += x_group(walk_offset(at, c));
    const float mean = workgroup_sum(lanes_total(sum)) / float(count);
    vec4 squares = vec4(0.0);
    for (ChannelWalk at = walk_from(lane, width); walk_inside(at); walk_next(at)) {
      const vec4 d = (x_group(walk_offset(at, c)) - mean) * kGroupValues;
      squares += d * d;
    }
    const float m2 = workgroup_sum(lanes_total(squares));
    const float rstd = inversesqrt(m2 / float(count) + p.eps);
    const float w = weight[c], b = bias[c];
    for (ChannelWalk at = walk_from(lane, width); walk_inside(at); walk_next(at)) {
      const uint i = walk_offset(at, c);
      y_group(i, (x_group(i) - mean) * rstd * w + b);
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
