#version 450
// LayerNorm parameter gradients, one invocation per channel (or, with VEC4, per four
// channels: C % 4 == 0 and the views 16-byte aligned) summing down the rows in order
// (deterministic, no atomics; the same sums either way):
//   dweight += sum_N dy * xhat,  dbias += sum_N dy.
// dy, x: (N, C)  mean, rstd: (N) from the forward  dweight, dbias: (C)
#extension GL_GOOGLE_include_directive : require
#include "norm.h"

layout(local_size_x = BRIGADE_WG_NORM_COLUMNS) in;
layout(constant_id = 0) const bool VEC4 = false;
layout(binding = 0) readonly buffer DY { float dy[]; };
layout(binding = 0) readonly buffer DY4 { vec4 dy4[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(binding = 2) readonly buffer Mean { float mean_in[]; };
layout(binding = 3) readonly buffer Rstd { float rstd_in[]; };
layout(binding = 4) buffer DWeight { float dweight[]; };
layout(binding = 4) buffer DWeight4 { vec4 dweight4[]; };
layout(binding = 5) buffer DBias { float dbias[]; };
layout(binding = 5) buffer DBias4 { vec4 dbias4[]; };
layout(push_constant) uniform Push { LayerNormPush p; };

// Channel (or quad) c of L per row, through views of type T.
#define LAYERNORM_WEIGHT_COLUMN(T, L, DY, X, DW, DB)              \
  {                                                               \
    if (c >= L) return;                                           \
    T dw = T(0.0), db = T(0.0);                                   \
    for (uint row = 0u; row < p.rows; ++row) {                    \
      const T g = DY[row * L + c];                                \
      dw += g * (X[row * L + c] - mean_in[row]) * rstd_in[row];  \
      db += g;                                                    \
    }                                                             \
    DW[c] += dw;                                                  \
    DB[c] += db;                                                  \
  }

void main() {
  const uint C = p.channels, c = gl_GlobalInvocationID.x;
  if (VEC4)
    LAYERNORM_WEIGHT_COLUMN(vec4, C / 4, dy4, x4, dweight4, dbias4)
  else
    LAYERNORM_WEIGHT_COLUMN(float, C, dy, x, dweight, dbias)
}
