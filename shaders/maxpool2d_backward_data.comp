#version 450
// MaxPool2d backward-data: each window's gradient goes to its argmax, recomputed from x.
//   x (N, C, H, W)  dy (N, C, OH, OW)  ->  dx (N, C, H, W), written whole (every element
//   that no window picks gets 0), so the caller need not clear it.
// No atomics, and no two invocations write the same dx:
//  - PAIRS (2 x 2 windows tiling the input): one invocation per window writes its four
//    elements as two vec2 stores; with QUADS, per two neighbouring windows, as two vec4;
//  - otherwise one invocation per input element gathers from the windows that contain it
//    (none, one, or several where windows overlap).
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_POOL_X, local_size_y = BRIGADE_WG_POOL_Y) in;
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 0) readonly buffer X2 { vec2 x2[]; };
layout(binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(binding = 0) readonly buffer XW { uint xw[]; };
layout(binding = 0) readonly buffer XW2 { uvec2 xw2[]; };
layout(binding = 1) readonly buffer DY { float dy[]; };
layout(binding = 1) readonly buffer DY2 { vec2 dy2[]; };
layout(binding = 2) writeonly buffer DX { float dx[]; };
layout(binding = 2) writeonly buffer DX2 { vec2 dx2[]; };
layout(binding = 2) writeonly buffer DX4 { vec4 dx4[]; };
layout(push_constant) uniform Push { MaxPool2dPush p; };

#include "maxpool2d.glsl"
// dx holds fp32 values rounded to this format (its input's precision).
BRIGADE_FORMAT(5, ROUND);

// The gradient at place `at` (0 to 3) of a window whose argmax is `best`.
float at_best(uint best, uint at, float g) { return best == at ? g : 0.0; }

// One plane of the grid's; main() walks the planes (N x C) in steps of the grid's depth,
// which the launcher caps at 65535.
void unpool_plane(uint plane) {
  if (QUADS) {
    // The grid covers pairs of windows (q, oh): windows 2 q and 2 q + 1.
    const uint q = gl_GlobalInvocationID.x, oh = gl_GlobalInvocationID.y;
    if (2 * q >= p.ow || oh >= p.oh) return;
    const uint row0 = (plane * p.h + oh * 2) * p.w + q * 4;
    const vec4 r0 = x_quad(row0), r1 = x_quad(row0 + p.w);
    vec2 top;
    const uint left = pair_argmax(r0.xy, r1.xy, top.x), right = pair_argmax(r0.zw, r1.zw, top.y);
    const vec2 d = dy2[(plane * p.oh + oh) * p.ow / 2 + q];
    const float gl = rounded(passes(top.x) ? d.x : 0.0, ROUND), gr = rounded(passes(top.y) ? d.y : 0.0, ROUND);
    dx4[row0 >> 2] = vec4(at_best(left, 0, gl), at_best(left, 1, gl), at_best(right, 0, gr), at_best(right, 1, gr));
    dx4[(row0 + p.w) >> 2] =
        vec4(at_best(left, 2, gl), at_best(left, 3, gl), at_best(right, 2, gr), at_best(right, 3, gr));
    return;
  }
  if (PAIRS) {
    // The grid covers windows (ow, oh).
    const uint ow = gl_GlobalInvocationID.x, oh = gl_GlobalInvocationID.y;
    if (ow >= p.ow || oh >= p.oh) return;
    const uint row0 = (plane * p.h + oh * 2) * p.w + ow * 2;
    float top;
    const uint best = pair_argmax(x_pair(row0), x_pair(row0 + p.w), top);
    const float g = rounded(passes(top) ? dy[(plane * p.oh + oh) * p.ow + ow] : 0.0, ROUND);
    dx2[row0 >> 1] = vec2(at_best(best, 0, g), at_best(best, 1, g));
    dx2[(row0 + p.w) >> 1] = vec2(at_best(best, 2, g), at_best(best, 3, g));
    return;
  }
  // The grid covers input elements (iw, ih): windows oh with oh * S <= ih < oh * S + K.
  const uint iw = gl_GlobalInvocationID.x, ih = gl_GlobalInvocationID.y;
  if (iw >= p.w || ih >= p.h) return;
  const uint i = (plane * p.h + ih) * p.w + iw;
  const uint oh_lo = ih + 1 > K ? (ih + 1 - K + S - 1) / S : 0;
  const uint ow_lo = iw + 1 > K ? (iw + 1 - K + S - 1) / S : 0;
  const uint oh_hi = min(ih / S + 1, p.oh), ow_hi = min(iw / S + 1, p.ow);
  float g = 0.0;
  if (passes(seen(x_at(i))))  // past a ReLU, nothing reaches an element that is not positive
    for (uint oh = oh_lo; oh < oh_hi; ++oh)
      for (uint ow = ow_lo; ow < ow_hi; ++ow)
        if (window_argmax(plane, oh, ow) == i) g += dy[(plane * p.oh + oh) * p.ow + ow];
  dx[i] = rounded(g, ROUND);
}

void main() {
  for (uint plane = gl_WorkGroupID.z; plane < p.planes; plane += gl_NumWorkGroups.z) unpool_plane(plane);
}
