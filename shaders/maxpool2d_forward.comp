#version 450
// MaxPool2d forward: y = the maximum of each K x K window, stride S, no padding.
//   x (N, C, H, W)  ->  y (N, C, OH, OW), OH = (H - K) / S + 1 (floored, as PyTorch)
// One invocation per output: x and y of the workgroup grid are ow and oh, z is the plane
// (n, c), so no index needs a division. Nothing is saved for backward: it recomputes the
// argmax.
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_POOL_X, local_size_y = BRIGADE_WG_POOL_Y) in;
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 0) readonly buffer X2 { vec2 x2[]; };
layout(binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Push { MaxPool2dPush p; };

#include "maxpool2d.glsl"

void main() {
  const uint ow = gl_GlobalInvocationID.x, oh = gl_GlobalInvocationID.y, plane = gl_WorkGroupID.z;
  if (ow >= p.ow || oh >= p.oh) return;
  float top;
  if (PAIRS) pair_argmax((plane * p.h + oh * 2) * p.w + ow * 2, top);
  else top = seen(x[window_argmax(plane, oh, ow)]);
  y[(plane * p.oh + oh) * p.ow + ow] = top;
}
