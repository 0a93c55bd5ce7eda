#version 450
// MaxPool2d forward: y = the maximum of each k x k window, stride s, no padding.
//   x (N, C, H, W)  ->  y (N, C, OH, OW), OH = (H - k) / s + 1 (floored, as PyTorch)
// One invocation per output. Nothing is saved for backward: it recomputes the argmax.
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_POOL) in;
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Push { MaxPool2dPush p; };

#include "maxpool2d.glsl"

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= p.planes * p.oh * p.ow) return;
  const uint plane = i / (p.oh * p.ow), oh = (i / p.ow) % p.oh, ow = i % p.ow;
  y[i] = x[window_argmax(plane, oh, ow)];
}
