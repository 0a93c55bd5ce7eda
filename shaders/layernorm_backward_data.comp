#version 450
// LayerNorm input gradient, one workgroup per row at a time. With xhat = (x - mean) * rstd and
// g = dy * weight:  dx += rstd * (g - mean_C(g) - xhat * mean_C(g * xhat)), or with RESIDUAL
// dx = residual + the same (the gradient a residual branch adds, in the same arithmetic as
// dx = residual first and += after).
// dy, x, dx, residual: (N, C)  weight: (C)  mean, rstd: (N) from the forward.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "norm.h"
#include "workgroup_reduce.h"
#include "formats.glsl"

layout(local_size_x_id = 0) in;
// With VEC4 (C % 4 == 0, every view 16-byte aligned) a lane takes four consecutive channels
// at a time, as in layernorm_forward.
layout(constant_id = 1) const bool VEC4 = false;
layout(binding = 0) readonly buffer DY { float dy[]; };
layout(binding = 0) readonly buffer DY4 { vec4 dy4[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(binding = 1) readonly buffer XW2 { uvec2 xw2[]; };
layout(binding = 2) readonly buffer Weight { float weight[]; };
layout(binding = 2) readonly buffer Weight4 { vec4 weight4[]; };
layout(binding = 3) readonly buffer Mean { float mean_in[]; };
layout(binding = 4) readonly buffer Rstd { float rstd_in[]; };
layout(binding = 5) buffer DX { float dx[]; };
layout(binding = 5) buffer DX4 { vec4 dx4[]; };
layout(constant_id = 6) const bool RESIDUAL = false;
layout(binding = 6) readonly buffer Residual { float residual[]; };
layout(binding = 6) readonly buffer Residual4 { vec4 residual4[]; };
// dx's 16-bit copy as this pass leaves dx (FORMAT_COPY, two to a word), for the products that
// read the gradient: only with VEC4.
layout(binding = 7) writeonly buffer Copy2 { uvec2 copy2[]; };
layout(push_constant) uniform Push { LayerNormPush p; };

// KEEP = ceil(L / width) (specialization constant 2): the elements of a row each lane takes,
// kept in registers between the two passes, as in layernorm_forward; the weight is kept
// across the rows the workgroup walks.
layout(constant_id = 2) const uint KEEP = 1;
// How x is stored, and the precision dx's sums are rounded to (an input gradient kept at its
// tensor's precision): 16 bits only with VEC4 (shaders/formats.glsl).
BRIGADE_FORMAT(3, FORMAT_X);
BRIGADE_FORMAT(4, ROUND_DX);
BRIGADE_FORMAT(5, FORMAT_COPY);

float x_at(uint i) { return x[i]; }
vec4 x_quad(uint q) {
  if (FORMAT_X == BRIGADE_FORMAT_FP32) return x4[q];
  return quad_in(xw2[q], FORMAT_X);
}

// dx's element or quad i as stored, into the copy.
void copy_out(uint i, float v) {}
void copy_out(uint q, vec4 v) {
  if (FORMAT_COPY != BRIGADE_FORMAT_FP32) copy2[q] = quad_out(v, FORMAT_COPY);
}

// The rows of this workgroup, each of L elements of type T (float, or vec4 with L = C / 4),
// through the views of that type, x read by X(i).
#define LAYERNORM_BACKWARD_ROWS(T, L, DY, X, W, DX, R)                      \
  {                                                                         \
    T w[KEEP], g[KEEP], xs[KEEP];                                           \
    for (uint j = 0; j < KEEP; ++j) w[j] = W[min(lane + j * width, L - 1)]; \
    for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) { \
      const uint base = row * L;                                            \
      const float mean = mean_in[row], rstd = rstd_in[row];                 \
      T sum_g = T(0.0), sum_gxhat = T(0.0);                                 \
      for (uint j = 0; j < KEEP; ++j) {                                     \
        const uint c = min(lane + j * width, L - 1);                        \
        g[j] = DY[base + c] * w[j];                                         \
        xs[j] = X(base + c);                                                \
        if (lane + j * width < L) {                                         \
          sum_g += g[j];                                                    \
          sum_gxhat += g[j] * (xs[j] - mean) * rstd;                        \
        }                                                                   \
      }                                                                     \
      const float mean_g = workgroup_sum(lanes_total(sum_g)) / float(C);    \
      const float mean_gxhat = workgroup_sum(lanes_total(sum_gxhat)) / float(C); \
      for (uint j = 0; j < KEEP; ++j) {                                     \
        const uint c = lane + j * width;                                    \
        const T xhat = (xs[j] - mean) * rstd;                               \
        if (c < L) {                                                        \
          const T v = rounded((RESIDUAL ? R[base + c] : DX[base + c]) + rstd * (g[j] - mean_g - xhat * mean_gxhat), ROUND_DX); \
          DX[base + c] = v;                                                 \
          copy_out(base + c, v);                                            \
        }                                                                   \
      }                                                                     \
    }                                                                       \
  }

void main() {
  const uint C = p.channels, lane = gl_LocalInvocationID.x, width = gl_WorkGroupSize.x;
  if (VEC4)
    LAYERNORM_BACKWARD_ROWS(vec4, C / 4, dy4, x_quad, weight4, dx4, residual4)
  else
    LAYERNORM_BACKWARD_ROWS(float, C, dy, x_at, weight, dx, residual)
}
