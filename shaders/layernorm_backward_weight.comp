#version 450
// LayerNorm parameter gradients, summed down the rows as column_sums.h says (a column is a
// channel, or with VEC4 four channels: C % 4 == 0 and the views 16-byte aligned):
//   dweight += sum_N dy * xhat,  dbias += sum_N dy.
// dy, x: (N, C)  mean, rstd: (N) from the forward  dweight, dbias: (C)
#extension GL_GOOGLE_include_directive : require
#include "norm.h"
#include "column_sums.h"
#include "formats.glsl"

layout(constant_id = 0) const bool VEC4 = false;
layout(binding = 0) readonly buffer DY { float dy[]; };
layout(binding = 0) readonly buffer DY4 { vec4 dy4[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(binding = 1) readonly buffer XW2 { uvec2 xw2[]; };
layout(binding = 2) readonly buffer Mean { float mean_in[]; };
layout(binding = 3) readonly buffer Rstd { float rstd_in[]; };
layout(binding = 4) buffer DWeight { float dweight[]; };
layout(binding = 4) buffer DWeight4 { vec4 dweight4[]; };
layout(binding = 5) buffer DBias { float dbias[]; };
layout(binding = 5) buffer DBias4 { vec4 dbias4[]; };
layout(push_constant) uniform Push { LayerNormPush p; };
// How x is stored: 16 bits only with VEC4 (shaders/formats.glsl).
BRIGADE_FORMAT(3, FORMAT_X);

float x_at(uint i) { return x[i]; }
vec4 x_quad(uint q) {
  if (FORMAT_X == BRIGADE_FORMAT_FP32) return x4[q];
  return quad_in(xw2[q], FORMAT_X);
}

// Column c of L per row, through views of type T (x read by X(i)), into dw and db.
#define LAYERNORM_WEIGHT_SUMS(T, L, DY, X)                                    \
  {                                                                           \
    T w = T(0.0), b = T(0.0);                                                 \
    if (c < L)                                                                \
      for (uint row = first; row < end; row += LANES) {                       \
        const T g = DY[row * L + c];                                          \
        w += g * (X(row * L + c) - mean_in[row]) * rstd_in[row];              \
        b += g;                                                               \
      }                                                                       \
    dw = vec4(w), db = vec4(b);                                               \
  }

void main() {
  const uint C = p.channels, items = VEC4 ? C / 4 : C;
  const uint first = first_row(p.rows), end = end_row(p.rows);
  for (uint c = sum_column(); more_columns(c, items); c += column_stride()) {
    vec4 dw, db;
    if (VEC4)
      LAYERNORM_WEIGHT_SUMS(vec4, C / 4, dy4, x_quad)
    else
      LAYERNORM_WEIGHT_SUMS(float, C, dy, x_at)
    dw = column_total(dw);
    db = column_total(db);
    if (c < items && gl_LocalInvocationID.y == 0) {
      if (VEC4) {
        STORE_TOTAL(dweight4, c, items, dw)
        STORE_TOTAL(dbias4, c, items, db)
      } else {
        STORE_TOTAL(dweight, c, items, dw.x)
        STORE_TOTAL(dbias, c, items, db.x)
      }
    }
  }
}
