#version 450
// Linear's bias gradient: dbias[o] += sum over n of dy[n][o].  dy: (N,OUT)  dbias: (OUT)
// Columns are features, or with VEC4 quads of features (the launcher proved OUT % 4 == 0 and
// the views 16-byte aligned), walked as column_sums.h says.
#extension GL_GOOGLE_include_directive : require
#include "matmul.h"
#include "column_sums.h"

layout(constant_id = 0) const bool VEC4 = false;
layout(binding = 0) readonly buffer DY { float dy[]; };
layout(binding = 0) readonly buffer DY4 { vec4 dy4[]; };
layout(binding = 1) buffer DBias { float dbias[]; };
layout(binding = 1) buffer DBias4 { vec4 dbias4[]; };
layout(push_constant) uniform Push { LinearBiasPush p; };

void main() {
  const uint items = VEC4 ? p.features / 4 : p.features;
  const uint first = first_row(p.rows), end = end_row(p.rows);
  for (uint o = sum_column(); more_columns(o, items); o += column_stride()) {
    vec4 sum = vec4(0.0);
    if (o < items) {
      if (VEC4)
        for (uint r = first; r < end; r += LANES) sum += dy4[r * items + o];
      else
        for (uint r = first; r < end; r += LANES) sum.x += dy[r * items + o];
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
