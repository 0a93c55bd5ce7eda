#version 450
// The reverse of conv2d_im2col: each input element of samples first .. first + count - 1
// gathers the column entries that were copied from it.
//   columns (count, IC*KH*KW, OH*OW)  ->  dx (N, IC, H, W), accumulated
// One invocation per input element (channels and pixels flattened on x, sample on z) adds its
// taps in a fixed order: deterministic, no atomics.
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_CONV) in;

layout(binding = 0) readonly buffer Columns { float columns[]; };
layout(binding = 1) buffer DX { float dx[]; };
layout(push_constant) uniform Push { Conv2dColumnsPush p; };

void main() {
  const Conv2dPush c = p.conv;
  const uint plane = c.h * c.w, i = gl_GlobalInvocationID.x;
  if (i >= c.ic * plane) return;
  const uint ic = i / plane, pixel = i % plane, z = gl_WorkGroupID.z;
  const uint taps = c.kh * c.kw, pixels = c.oh * c.ow;
  const uint ih = pixel / c.w + c.pad_h, iw = pixel % c.w + c.pad_w;  // in padded coordinates
  const uint base = (z * c.ic + ic) * taps * pixels;
  float sum = 0.0;
  for (uint kh = 0; kh < c.kh && kh <= ih; ++kh) {
    const uint rh = ih - kh;
    if (rh % c.stride_h != 0 || rh / c.stride_h >= c.oh) continue;
    for (uint kw = 0; kw < c.kw && kw <= iw; ++kw) {
      const uint rw = iw - kw;
      if (rw % c.stride_w != 0 || rw / c.stride_w >= c.ow) continue;
      sum += columns[base + (kh * c.kw + kw) * pixels + (rh / c.stride_h) * c.ow + rw / c.stride_w];
    }
  }
  const uint at = ((p.first + z) * c.ic + ic) * plane + pixel;
  dx[at] += sum;
}
