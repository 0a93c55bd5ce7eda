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
// With VEC4 (C % 4 == 0, every view 16-byte aligned) a lane takes four consecutive channels
// at a time: on a CPU driver each load is a loop over the lanes, so a vec4 costs about what
// one float does.
layout(constant_id = 1) const bool VEC4 = false;
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(binding = 1) readonly buffer Weight { float weight[]; };
layout(binding = 1) readonly buffer Weight4 { vec4 weight4[]; };
layout(binding = 2) readonly buffer Bias { float bias[]; };
layout(binding = 2) readonly buffer Bias4 { vec4 bias4[]; };
layout(binding = 3) writeonly buffer Y { float y[]; };
layout(binding = 3) writeonly buffer Y4 { vec4 y4[]; };
layout(binding = 4) writeonly buffer Mean { float mean_out[]; };
layout(binding = 5) writeonly buffer Rstd { float rstd_out[]; };
layout(push_constant) uniform Push { LayerNormPush p; };

// One row of L elements of type T (float, or vec4 with L = C / 4) through the views X, W, B
// and Y of that type; sets mean and rstd.
#define LAYERNORM_ROW(T, L, X, W, B, Y)                                    \
  {                                                                         \
    const uint base = row * L;                                              \
    T sum = T(0.0);                                                         \
    for (uint c = lane; c < L; c += width) sum += X[base + c];              \
    mean = workgroup_sum(lanes_total(sum)) / float(C);                      \
    T squares = T(0.0);                                                     \
    for (uint c = lane; c < L; c += width) {                                \
      const T d = X[base + c] - mean;                                       \
      squares += d * d;                                                     \
    }                                                                       \
    rstd = inversesqrt(workgroup_sum(lanes_total(squares)) / float(C) + p.eps); \
    for (uint c = lane; c < L; c += width)                                  \
      Y[base + c] = (X[base + c] - mean) * rstd * W[c] + B[c];              \
  }

void main() {
  const uint C = p.channels, lane = gl_LocalInvocationID.x, width = gl_WorkGroupSize.x;
  for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) {
    float mean, rstd;
    if (VEC4)
      LAYERNORM_ROW(vec4, C / 4, x4, weight4, bias4, y4)
    else
      LAYERNORM_ROW(float, C, x, weight, bias, y)
    if (lane == 0u) {
      mean_out[row] = mean;
      rstd_out[row] = rstd;
    }
  }
}
