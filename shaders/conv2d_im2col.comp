#version 450
// Conv2d's columns (im2col): the input patches of samples first .. first + count - 1 laid out
// so that a convolution becomes a matrix product (ops/conv2d.cpp):
//   x (N, IC, H, W)  ->  columns (count, IC*KH*KW, OH*OW)
//   columns[z][(ic*KH + kh)*KW + kw][oh*OW + ow] = x[first + z][ic][oh*SH - PH + kh][ow*SW - PW + kw]
// with zero where the tap falls in the padding. One invocation per input channel and output
// pixel (x, flattened, so that workgroups are few and full), or per four consecutive output
// pixels with QUADS (OH*OW % 4 == 0, columns 16-byte aligned), writes its KH*KW taps; the
// sample is on z. FORMAT_X: how x is stored (shaders/formats.glsl).
#extension GL_GOOGLE_include_directive : require
#include "conv.h"
#include "formats.glsl"

layout(local_size_x = BRIGADE_WG_CONV) in;
layout(constant_id = 0) const bool QUADS = false;
#include "conv_geometry.glsl"
BRIGADE_FORMAT(11, FORMAT_X);

layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 0) readonly buffer XW { uint xw[]; };
layout(binding = 1) writeonly buffer Columns { float columns[]; };
layout(binding = 1) writeonly buffer Columns4 { vec4 columns4[]; };
layout(push_constant) uniform Push { Conv2dColumnsPush p; };
#include "conv_tap.glsl"

void main() {
  const Conv2dPush c = p.conv;
  const uint per = QUADS ? 4 : 1;
  const uint pixels = OH * OW, i = gl_GlobalInvocationID.x;
  if (i >= c.ic * pixels / per) return;
  const uint ic = i / (pixels / per), pixel = (i % (pixels / per)) * per, z = gl_WorkGroupID.z;
  ivec4 ih0 = ivec4(0), iw0 = ivec4(0);
  for (uint q = 0; q < per; ++q) {
    ih0[q] = int(((pixel + q) / OW) * SH) - int(PH);
    iw0[q] = int(((pixel + q) % OW) * SW) - int(PW);
  }
  const uint plane = ((p.first + z) * c.ic + ic) * H * W;
  uint at = ((z * c.ic + ic) * KH * KW) * pixels + pixel;
  for (uint kh = 0; kh < KH; ++kh)
    for (uint kw = 0; kw < KW; ++kw, at += pixels) {
      if (QUADS) {
        columns4[at >> 2] = vec4(tap(plane, ih0.x + int(kh), iw0.x + int(kw)), tap(plane, ih0.y + int(kh), iw0.y + int(kw)),
                                 tap(plane, ih0.z + int(kh), iw0.z + int(kw)), tap(plane, ih0.w + int(kh), iw0.w + int(kw)));
      } else {
        columns[at] = tap(plane, ih0.x + int(kh), iw0.x + int(kw));
      }
    }
}
