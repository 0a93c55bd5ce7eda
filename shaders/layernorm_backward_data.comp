#version 450
// LayerNorm input gradient, one workgroup per row. With xhat = (x - mean) * rstd and
// g = dy * weight:  dx += rstd * (g - mean_C(g) - xhat * mean_C(g * xhat)).
// dy, x, dx: (N, C)  weight: (C)  mean, rstd: (N) from the forward.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "norm.h"
#include "workgroup_reduce.h"

layout(local_size_x_id = 0) in;
layout(binding = 0) readonly buffer DY { float dy[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 2) readonly buffer Weight { float weight[]; };
layout(binding = 3) readonly buffer Mean { float mean_in[]; };
layout(binding = 4) readonly buffer Rstd { float rstd_in[]; };
layout(binding = 5) buffer DX { float dx[]; };
layout(push_constant) uniform Push { LayerNormPush p; };

void main() {
  const uint C = p.channels, lane = gl_LocalInvocationID.x, width = gl_WorkGroupSize.x;
  for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) {
    const uint base = row * C;
    const float mean = mean_in[row], rstd = rstd_in[row];
    float sum_g = 0.0, sum_gxhat = 0.0;
    for (uint c = lane; c < C; c += width) {
      const float g = dy[base + c] * weight[c];
      sum_g += g;
      sum_gxhat += g * (x[base + c] - mean) * rstd;
    }
    const float mean_g = workgroup_sum(sum_g) / float(C);
    const float mean_gxhat = workgroup_sum(sum_gxhat) / float(C);
    for (uint c = lane; c < C; c += width) {
      const float xhat = (x[base + c] - mean) * rstd;
      dx[base + c] += rstd * (dy[base + c] * weight[c] - mean_g - xhat * mean_gxhat);
    }
  }
}
