#version 450
// The backward of a Linear's folded ReLU and its bias gradient, one pass over the output
// gradient:
//   g[n][o] = dy[n][o] where y[n][o] > 0, else 0     (as relu_backward.comp, written whole)
//   dbias[o] += sum over n of g[n][o]                  (as linear_bias_backward.comp)
// walking columns, or with VEC4 quads of columns, as column_sums.h says: the same bits as
// the two kernels one after the other. FORMAT_Y: how y is stored (shaders/formats.glsl).
// y: (N, OUT)  dy, g: (N, OUT)  dbias: (OUT)
#extension GL_GOOGLE_include_directive : require
#include "matmul.h"
#include "column_sums.h"
#include "formats.glsl"

layout(constant_id = 0) const bool VEC4 = false;
BRIGADE_FORMAT(3, FORMAT_Y);
layout(binding = 0) readonly buffer Y { float y[]; };
layout(binding = 0) readonly buffer Y4 { vec4 y4[]; };
layout(binding = 0) readonly buffer YW { uint yw[]; };
layout(binding = 0) readonly buffer YW2 { uvec2 yw2[]; };
layout(binding = 1) readonly buffer DY { float dy[]; };
layout(binding = 1) readonly buffer DY4 { vec4 dy4[]; };
layout(binding = 2) writeonly buffer G { float g[]; };
layout(binding = 2) writeonly buffer G4 { vec4 g4[]; };
layout(binding = 3) buffer DBias { float dbias[]; };
layout(binding = 3) buffer DBias4 { vec4 dbias4[]; };
layout(push_constant) uniform Push { LinearBiasPush p; };

void main() {
  const uint items = VEC4 ? p.features / 4 : p.features;
  const uint first = first_row(p.rows), end = end_row(p.rows);
  for (uint o = sum_column(); more_columns(o, items); o += column_stride()) {
    vec4 sum = vec4(0.0);
    if (o < items) {
      if (VEC4)
        for (uint r = first; r < end; r += LANES) {
          const uint i = r * items + o;
          const vec4 yv = FORMAT_Y == BRIGADE_FORMAT_FP32 ? y4[i] : quad_in(yw2[i], FORMAT_Y);
          const vec4 gv = mix(vec4(0.0), dy4[i], greaterThan(yv, vec4(0.0)));
          g4[i] = gv;
          sum += gv;
        }
      else
        for (uint r = first; r < end; r += LANES) {
          const uint i = r * items + o;
          const float yv = FORMAT_Y == BRIGADE_FORMAT_FP32 ? y[i] : half_in(yw[i >> 1], i, FORMAT_Y);
          const float gv = yv > 0.0 ? dy[i] : 0.0;
          g[i] = gv;
          sum.x += gv;
        }
    }
    sum = column_total(sum);
    if (o < items && gl_LocalInvocationID.y == 0) {
      if (VEC4)
        STORE_TOTAL(dbias4, o, items, sum)
      else
        STORE_TOTAL(dbias, o, items, sum.x)
    }
  }
}
