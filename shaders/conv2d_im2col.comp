#version 450
// Conv2d's columns (im2col): the input patches of samples first .. first + count - 1 laid out
// so that a convolution becomes a matrix product (ops/conv2d.cpp):
//   x (N, IC, H, W)  ->  columns (count, IC*KH*KW, OH*OW)
//   columns[z][(ic*KH + kh)*KW + kw][oh*OW + ow] = x[first + z][ic][oh*SH - PH + kh][ow*SW - PW + kw]
// with zero where the tap falls in the padding. One invocation per input channel and output
// pixel (x, flattened, so that workgroups are few and full) writes its KH*KW taps; the sample
// is on z.
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_CONV) in;

layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) writeonly buffer Columns { float columns[]; };
layout(push_constant) uniform Push { Conv2dColumnsPush p; };

void main() {
  const Conv2dPush c = p.conv;
  const uint pixels = c.oh * c.ow, i = gl_GlobalInvocationID.x;
  if (i >= c.ic * pixels) return;
  const uint ic = i / pixels, pixel = i % pixels, z = gl_WorkGroupID.z;
  const int ih0 = int((pixel / c.ow) * c.stride_h) - int(c.pad_h);
  const int iw0 = int((pixel % c.ow) * c.stride_w) - int(c.pad_w);
  const uint plane = ((p.first + z) * c.ic + ic) * c.h * c.w;
  uint at = ((z * c.ic + ic) * c.kh * c.kw) * pixels + pixel;
  for (uint kh = 0; kh < c.kh; ++kh) {
    const int ih = ih0 + int(kh);
    for (uint kw = 0; kw < c.kw; ++kw, at += pixels) {
      const int iw = iw0 + int(kw);
      float v = 0.0;
      if (ih >= 0 && ih < int(c.h) && iw >= 0 && iw < int(c.w)) v = x[plane + uint(ih) * c.w + uint(iw)];
      columns[at] = v;
    }
  }
}
