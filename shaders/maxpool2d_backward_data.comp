#version 450
// MaxPool2d backward-data: each window's gradient goes to its argmax, recomputed from x.
//   x (N, C, H, W)  dy (N, C, OH, OW)  ->  dx (N, C, H, W), accumulated
// One invocation per input element gathers from the windows that contain it (with s < k
// windows overlap), so no two invocations write the same dx and no atomics are needed.
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_POOL) in;
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer DY { float dy[]; };
layout(binding = 2) buffer DX { float dx[]; };
layout(push_constant) uniform Push { MaxPool2dPush p; };

#include "maxpool2d.glsl"

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= p.planes * p.h * p.w) return;
  const uint plane = i / (p.h * p.w), ih = (i / p.w) % p.h, iw = i % p.w;
  // Windows oh with oh * s <= ih < oh * s + k, and likewise for columns.
  const uint oh_lo = ih + 1 > p.k ? (ih + 1 - p.k + p.s - 1) / p.s : 0;
  const uint ow_lo = iw + 1 > p.k ? (iw + 1 - p.k + p.s - 1) / p.s : 0;
  const uint oh_hi = min(ih / p.s + 1, p.oh), ow_hi = min(iw / p.s + 1, p.ow);
  float g = 0.0;
  for (uint oh = oh_lo; oh < oh_hi; ++oh)
    for (uint ow = ow_lo; ow < ow_hi; ++ow)
      if (window_argmax(plane, oh, ow) == i) g += dy[(plane * p.oh + oh) * p.ow + ow];
  dx[i] += g;
}
