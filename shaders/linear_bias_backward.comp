#version 450
// Linear's bias gradient: dbias[o] += sum over n of dy[n][o].  dy: (N,OUT)  dbias: (OUT)
// One invocation per feature (or, with VEC4, per four features: the launcher proved OUT % 4
// == 0 and the views 16-byte aligned) walks down its column in order, so every feature's sum
// is the same whichever path runs. Small workgroups, so a few hundred features still make
// several: a CPU device runs each workgroup on one thread.
#extension GL_GOOGLE_include_directive : require
#include "matmul.h"

layout(local_size_x = BRIGADE_WG_LINEAR_BIAS) in;
layout(constant_id = 0) const bool VEC4 = false;
layout(binding = 0) readonly buffer DY { float dy[]; };
layout(binding = 0) readonly buffer DY4 { vec4 dy4[]; };
layout(binding = 1) buffer DBias { float dbias[]; };
layout(binding = 1) buffer DBias4 { vec4 dbias4[]; };
layout(push_constant) uniform Push { LinearBiasPush p; };

void main() {
  const uint o = gl_GlobalInvocationID.x;
  if (VEC4) {
    const uint quads = p.features / 4;
    if (o >= quads) return;
    vec4 sum = vec4(0.0);
    for (uint r = 0; r < p.rows; ++r) sum += dy4[r * quads + o];
    dbias4[o] += sum;
    return;
  }
  if (o >= p.features) return;
  float sum = 0.0;
  for (uint r = 0; r < p.rows; ++r) sum += dy[r * p.features + o];
  dbias[o] += sum;
}
