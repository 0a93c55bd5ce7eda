#version 450
// First level of the squared L2 norm of a gradient: workgroup w writes
//   partial[w] = sum of g[i]^2 over i = w * WG + l + k * (groups * WG)
// Each invocation sums its strided elements in order, then the workgroup adds the WG sums
// in a fixed tree: the result is deterministic (no atomics). The host adds the partials.
// g: (n)  partial: (groups)
#extension GL_GOOGLE_include_directive : require
#include "optim.h"

layout(local_size_x = BRIGADE_WG_NORM) in;
layout(binding = 0) readonly buffer Grad { float g[]; };
layout(binding = 1) writeonly buffer Partial { float partial[]; };
layout(push_constant) uniform Push { GradNormPush p; };

shared float sums[BRIGADE_WG_NORM];

void main() {
  const uint l = gl_LocalInvocationID.x;
  const uint stride = gl_NumWorkGroups.x * BRIGADE_WG_NORM;
  float acc = 0.0;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) acc += g[i] * g[i];
  sums[l] = acc;
  barrier();
  for (uint width = BRIGADE_WG_NORM / 2; width > 0; width >>= 1) {
    if (l < width) sums[l] += sums[l + width];
    barrier();
  }
  if (l == 0) partial[gl_WorkGroupID.x] = sums[0];
}
