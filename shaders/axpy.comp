#version 450
// y[i] += alpha * x[i] for i < n, or the sum of `terms` x vectors `stride` apart added in
// order (shaders/push.h).  x: (terms, stride)  y: (n)
#extension GL_GOOGLE_include_directive : require
#include "push.h"

layout(local_size_x = BRIGADE_WG_1D) in;
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) buffer Y { float y[]; };
layout(push_constant) uniform Push { AxpyPush p; };

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= p.n) return;
  float acc = y[i];
  for (uint t = 0; t < max(p.terms, 1u); ++t) acc += p.alpha * x[t * p.stride + i];
  y[i] = acc;
}
