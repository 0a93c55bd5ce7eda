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
// With VEC4 (C % 4 == 0, every view 16-byte aligned) a lane takes four consecutive channels
// at a time, as in layernorm_forward.
layout(constant_id = 1) const bool VEC4 = false;
layout(binding = 0) readonly buffer DY { float dy[]; };
layout(binding = 0) readonly buffer DY4 { vec4 dy4[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(binding = 2) readonly buffer Weight { float weight[]; };
layout(binding = 2) readonly buffer Weight4 { vec4 weight4[]; };
layout(binding = 3) readonly buffer Mean { float mean_in[]; };
layout(binding = 4) readonly buffer Rstd { float rstd_in[]; };
layout(binding = 5) buffer DX { float dx[]; };
layout(binding = 5) buffer DX4 { vec4 dx4[]; };
layout(push_constant) uniform Push { LayerNormPush p; };

// One row of L elements of type T (float, or vec4 with L = C / 4) through the views of that
// type.
#define LAYERNORM_BACKWARD_ROW(T, L, DY, X, W, DX)                          \
  {                                                                         \
    const uint base = row * L;                                              \
    T sum_g = T(0.0), sum_gxhat = T(0.0);                                   \
    for (uint c = lane; c < L; c += width) {                                \
      const T g = DY[base + c] * W[c];                                      \
      sum_g += g;                                                           \
      sum_gxhat += g * (X[base + c] - mean) * rstd;                         \
    }                                                                       \
    const float mean_g = workgroup_sum(lanes_total(sum_g)) / float(C);      \
    const float mean_gxhat = workgroup_sum(lanes_total(sum_gxhat)) / float(C); \
    for (uint c = lane; c < L; c += width) {                                \
      const T xhat = (X[base + c] - mean) * rstd;                           \
      DX[base + c] += rstd * (DY[base + c] * W[c] - mean_g - xhat * mean_gxhat); \
    }                                                                       \
  }

void main() {
  const uint C = p.channels, lane = gl_LocalInvocationID.x, width = gl_WorkGroupSize.x;
  for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) {
    const float mean = mean_in[row], rstd = rstd_in[row];
    if (VEC4)
      LAYERNORM_BACKWARD_ROW(vec4, C / 4, dy4, x4, weight4, dx4)
    else
      LAYERNORM_BACKWARD_ROW(float, C, dy, x, weight, dx)
  }
}
