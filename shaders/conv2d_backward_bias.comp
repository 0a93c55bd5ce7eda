#version 450
// Conv2d backward for the bias: dbias[oc] += sum over (n, oh, ow) of dy[n, oc, oh, ow].
//   dy (N, OC, OH, OW)  ->  dbias (OC), accumulated
// One workgroup per output channel; its invocations stride over the pixels and add their
// partial sums along a fixed tree in shared memory (deterministic, no float atomics).
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_CONV_REDUCE) in;

layout(binding = 0) readonly buffer DY { float dy[]; };
layout(binding = 1) buffer DB { float db[]; };
layout(push_constant) uniform Push { Conv2dPush p; };

shared float partial[BRIGADE_WG_CONV_REDUCE];

void main() {
  const uint tid = gl_LocalInvocationID.x, oc = gl_WorkGroupID.x;
  const uint ohw = p.oh * p.ow;
  float acc = 0.0;
  for (uint n = 0; n < p.n; ++n) {
    const uint plane = (n * p.oc + oc) * ohw;
    for (uint s = tid; s < ohw; s += BRIGADE_WG_CONV_REDUCE) acc += dy[plane + s];
  }
  partial[tid] = acc;
  for (uint half_ = BRIGADE_WG_CONV_REDUCE / 2; half_ > 0; half_ /= 2) {
    barrier();
    if (tid < half_) partial[tid] += partial[tid + half_];
  }
  if (tid == 0) db[oc] += partial[0];
}
