#version 450
// BatchNorm2d training backward through the micro-batch statistics, one workgroup per
// channel; one kernel because the parameter gradients are the sums the input gradient
// needs. With xhat = (x - mean) * rstd and M = N * HW:
//   dbias += sum dy,  dweight += sum dy * xhat,
//   dx = weight * rstd * (dy - sum(dy) / M - xhat * sum(dy * xhat) / M)
// dy, x, dx: (N, C, HW)  weight, mean, rstd: (C) from the forward  dweight, dbias: (C)
// x may be stored in 16 bits (shaders/formats.glsl), and dx rounded to a 16-bit precision (an
// input gradient kept at its input's); dy, dx and every sum stay fp32.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "norm.h"
#include "workgroup_reduce.h"
#include "formats.glsl"

layout(local_size_x_id = 0) in;
layout(binding = 0) readonly buffer DY { float dy[]; };
layout(binding = 0) readonly buffer DY4 { vec4 dy4[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(binding = 1) readonly buffer XW { uint xw[]; };
layout(binding = 1) readonly buffer XW2 { uvec2 xw2[]; };
layout(binding = 2) readonly buffer Weight { float weight[]; };
layout(binding = 3) readonly buffer Mean { float mean_in[]; };
layout(binding = 4) readonly buffer Rstd { float rstd_in[]; };
layout(binding = 5) writeonly buffer DX { float dx[]; };
layout(binding = 5) writeonly buffer DX4 { vec4 dx4[]; };
layout(binding = 6) buffer DWeight { float dweight[]; };
layout(binding = 7) buffer DBias { float dbias[]; };
layout(push_constant) uniform Push { BatchNormPush p; };

// How x is stored, the precision dx is rounded to, and the values of a plane a lane takes at
// a time (GROUP, shaders/channel_walk.glsl).
BRIGADE_FORMAT(1, FORMAT_X);
BRIGADE_FORMAT(2, ROUND_DX);
layout(constant_id = 3) const uint GROUP = 1;
#include "channel_walk.glsl"

// The GROUP values of dy from element i (a multiple of GROUP), the rest zero.
vec4 dy_group(uint i) {
  if (GROUP == 4) return dy4[i >> 2];
  return vec4(dy[i], GROUP == 2 ? dy[i + 1] : 0.0, 0.0, 0.0);
}
// The first GROUP values of v, rounded, as dx's elements from i.
void dx_group(uint i, vec4 v) {
  v = rounded(v, ROUND_DX);
  if (GROUP == 4) dx4[i >> 2] = v;
  else if (GROUP == 2) dx[i] = v.x, dx[i + 1] = v.y;
  else dx[i] = v.x;
}

void main() {
  const uint lane = gl_LocalInvocationID.x, width = gl_WorkGroupSize.x;
  const uint count = p.batch * p.spatial;
  for (uint c = gl_WorkGroupID.x; c < p.channels; c += gl_NumWorkGroups.x) {
    const float mean = mean_in[c], rstd = rstd_in[c];
    vec4 sum_dy = vec4(0.0), sum_dy_xhat = vec4(0.0);
    for (ChannelWalk at = walk_from(lane, width); walk_inside(at); walk_next(at)) {
      const uint i = walk_offset(at, c);
      const vec4 g = dy_group(i);
      sum_dy += g;
      sum_dy_xhat += g * (x_group(i) - mean) * rstd;
    }
    const float total_dy = workgroup_sum(lanes_total(sum_dy));
    const float total_dy_xhat = workgroup_sum(lanes_total(sum_dy_xhat));
    if (lane == 0u) {
      dweight[c] += total_dy_xhat;
      dbias[c] += total_dy;
    }
    const float scale = weight[c] * rstd, mean_dy = total_dy / float(count);
    const float mean_dy_xhat = total_dy_xhat / float(count);
    for (ChannelWalk at = walk_from(lane, width); walk_inside(at); walk_next(at)) {
      const uint i = walk_offset(at, c);
      dx_group(i, scale * (dy_group(i) - mean_dy - (x_group(i) - mean) * rstd * mean_dy_xhat));
    }
  }
}
