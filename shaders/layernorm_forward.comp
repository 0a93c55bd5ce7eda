#version 450
// LayerNorm over the last dimension, one workgroup per row at a time (two passes over the
// row: the mean first, then squared deviations from it, which stays accurate when
// |mean| >> std):
//   y = (x - mean) * rstd * weight + bias,  rstd = 1 / sqrt(var + eps),  var biased.
// x, y: (N, C)  weight, bias: (C)  mean, rstd: (N), saved for the backward passes.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "norm.h"
#include "workgroup_reduce.h"
#include "formats.glsl"

layout(local_size_x_id = 0) in;
// With VEC4 (C % 4 == 0, every view 16-byte aligned) a lane takes four consecutive channels
// at a time: on a CPU driver each load is a loop over the lanes, so a vec4 costs about what
// one float does.
layout(constant_id = 1) const bool VEC4 = false;
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(binding = 0) readonly buffer XW2 { uvec2 xw2[]; };
layout(binding = 1) readonly buffer Weight { float weight[]; };
layout(binding = 1) readonly buffer Weight4 { vec4 weight4[]; };
layout(binding = 2) readonly buffer Bias { float bias[]; };
layout(binding = 2) readonly buffer Bias4 { vec4 bias4[]; };
layout(binding = 3) writeonly buffer Y { float y[]; };
layout(binding = 3) writeonly buffer Y4 { vec4 y4[]; };
layout(binding = 3) writeonly buffer YW2 { uvec2 yw2[]; };
layout(binding = 4) writeonly buffer Mean { float mean_out[]; };
layout(binding = 5) writeonly buffer Rstd { float rstd_out[]; };
layout(push_constant) uniform Push { LayerNormPush p; };

// KEEP = ceil(L / width) (specialization constant 2, set by the launcher): the elements of a
// row each lane takes, lane + j * width for j < KEEP. A lane keeps them in registers across
// the two passes, and keeps its weight and bias across the rows its workgroup walks: each
// element is loaded once (on a CPU driver every load is a loop over the lanes).
layout(constant_id = 2) const uint KEEP = 1;
// How x and y are stored (shaders/formats.glsl): 16 bits only with VEC4, a quad being two
// words (the launcher proves it).
BRIGADE_FORMAT(3, FORMAT_X);
BRIGADE_FORMAT(4, FORMAT_Y);

float x_at(uint i) { return x[i]; }
void y_set(uint i, float v) { y[i] = v; }
vec4 x_quad(uint q) {
  if (FORMAT_X == BRIGADE_FORMAT_FP32) return x4[q];
  return quad_in(xw2[q], FORMAT_X);
}
void y_quad(uint q, vec4 v) {
  if (FORMAT_Y == BRIGADE_FORMAT_FP32) y4[q] = v;
  else yw2[q] = quad_out(v, FORMAT_Y);
}

// The rows of this workgroup, each of L elements of type T (float, or vec4 with L = C / 4),
// through the views W and B of that type, x read by X(i) and y written by Y(i, value). Past
// L a lane reads element L - 1 and leaves it out.
#define LAYERNORM_ROWS(T, L, X, W, B, Y)                                    \
  {                                                                         \
    T w[KEEP], b[KEEP], v[KEEP];                                            \
    for (uint j = 0; j < KEEP; ++j) {                                       \
      const uint c = min(lane + j * width, L - 1);                          \
      w[j] = W[c];                                                          \
      b[j] = B[c];                                                          \
    }                                                                       \
    for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) { \
      const uint base = row * L;                                            \
      T sum = T(0.0);                                                       \
      for (uint j = 0; j < KEEP; ++j) {                                     \
        v[j] = X(base + min(lane + j * width, L - 1));                      \
        if (lane + j * width < L) sum += v[j];                              \
      }                                                                     \
      const float mean = workgroup_sum(lanes_total(sum)) / float(C);        \
      T squares = T(0.0);                                                   \
      for (uint j = 0; j < KEEP; ++j) {                                     \
        const T d = v[j] - mean;                                            \
        if (lane + j * width < L) squares += d * d;                         \
      }                                                                     \
      const float rstd = inversesqrt(workgroup_sum(lanes_total(squares)) / float(C) + p.eps); \
      for (uint j = 0; j < KEEP; ++j)                                       \
        if (lane + j * width < L) Y(base + lane + j * width, (v[j] - mean) * rstd * w[j] + b[j]); \
      if (lane == 0u) {                                                     \
        mean_out[row] = mean;                                               \
        rstd_out[row] = rstd;                                               \
      }                                                                     \
    }                                                                       \
  }

void main() {
  const uint C = p.channels, lane = gl_LocalInvocationID.x, width = gl_WorkGroupSize.x;
  if (VEC4)
    LAYERNORM_ROWS(vec4, C / 4, x_quad, weight4, bias4, y_quad)
  else
    LAYERNORM_ROWS(float, C, x_at, weight, bias, y_set)
}
