#version 450
// Linear's bias gradient: dbias[o] += sum over n of dy[n][o].  dy: (N,OUT)  dbias: (OUT)
#extension GL_GOOGLE_include_directive : require
#include "matmul.h"

layout(local_size_x = BRIGADE_WG_LINEAR_BIAS) in;
layout(binding = 0) readonly buffer DY { float dy[]; };
layout(binding = 1) buffer DBias { float dbias[]; };
layout(push_constant) uniform Push { LinearBiasPush p; };

void main() {
  // One invocation per feature walks down its column; neighbouring invocations read
  // neighbouring addresses of each row.
  const uint o = gl_GlobalInvocationID.x;
  if (o >= p.features) return;
  float sum = 0.0;
  for (uint r = 0; r < p.rows; ++r) sum += dy[r * p.features + o];
  dbias[o] += sum;
}
