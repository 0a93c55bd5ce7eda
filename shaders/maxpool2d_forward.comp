#version 450
// MaxPool2d forward: y = the maximum of each K x K window, stride S, no padding.
//   x (N, C, H, W)  ->  y (N, C, OH, OW), OH = (H - K) / S + 1 (floored, as PyTorch)
// One invocation per output: x and y of the workgroup grid are ow and oh, z is the plane
// (n, c), so no index needs a division. Nothing is saved for backward: it recomputes the
// argmax. With QUADS, one invocation per two neighbouring windows of a row. Otherwise a 16-bit
// y (FORMAT_Y) is written a word at a time: one invocation per two consecutive outputs of the
// whole tensor, on a flat grid (x, then y, of workgroups).
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_POOL_X, local_size_y = BRIGADE_WG_POOL_Y) in;
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 0) readonly buffer X2 { vec2 x2[]; };
layout(binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(binding = 0) readonly buffer XW { uint xw[]; };
layout(binding = 0) readonly buffer XW2 { uvec2 xw2[]; };
layout(binding = 1) writeonly buffer Y { float y[]; };
layout(binding = 1) writeonly buffer Y2 { vec2 y2[]; };
layout(binding = 1) writeonly buffer YW { uint yw[]; };
layout(push_constant) uniform Push { MaxPool2dPush p; };
#include "maxpool2d.glsl"
BRIGADE_FORMAT(5, FORMAT_Y);

float pooled(uint plane, uint oh, uint ow) {
  float top;
  if (PAIRS) {
    const uint row0 = (plane * p.h + oh * 2) * p.w + ow * 2;
    pair_argmax(x_pair(row0), x_pair(row0 + p.w), top);
  } else {
    top = seen(x_at(window_argmax(plane, oh, ow)));
  }
  return top;
}

// Output f of the whole tensor (planes one after another).
float pooled_at(uint f) {
  const uint per = p.oh * p.ow, r = f % per;
  return pooled(f / per, r / p.ow, r % p.ow);
}

// The grid's z walks the planes (N x C) in steps of its depth: the launcher caps it at 65535.
void pool_plane(uint plane) {
  if (QUADS) {  // windows 2 q and 2 q + 1 of row oh, stored as a pair (a word in 16 bits)
    const uint q = gl_GlobalInvocationID.x, oh = gl_GlobalInvocationID.y;
    if (2 * q >= p.ow || oh >= p.oh) return;
    const uint row0 = (plane * p.h + oh * 2) * p.w + q * 4;
    const vec4 r0 = x_quad(row0), r1 = x_quad(row0 + p.w);
    vec2 top;
    pair_argmax(r0.xy, r1.xy, top.x);
    pair_argmax(r0.zw, r1.zw, top.y);
    const uint at = (plane * p.oh + oh) * p.ow / 2 + q;
    if (FORMAT_Y != BRIGADE_FORMAT_FP32) yw[at] = pair_out(top.x, top.y, FORMAT_Y);
    else y2[at] = top;
    return;
  }
  const uint ow = gl_GlobalInvocationID.x, oh = gl_GlobalInvocationID.y;
  if (ow >= p.ow || oh >= p.oh) return;
  y[(plane * p.oh + oh) * p.ow + ow] = pooled(plane, oh, ow);
}

void main() {
  if (!QUADS && FORMAT_Y != BRIGADE_FORMAT_FP32) {
    const uint group = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    const uint pair = group * (BRIGADE_WG_POOL_X * BRIGADE_WG_POOL_Y) + gl_LocalInvocationIndex;
    const uint total = p.planes * p.oh * p.ow;
    if (2 * pair >= total) return;
    // An odd count's last word keeps its upper half zero, as a pack leaves it.
    const float hi = 2 * pair + 1 < total ? pooled_at(2 * pair + 1) : 0.0;
    yw[pair] = pair_out(pooled_at(2 * pair), hi, FORMAT_Y);
    return;
  }
  for (uint plane = gl_WorkGroupID.z; plane < p.planes; plane += gl_NumWorkGroups.z) pool_plane(plane);
}
