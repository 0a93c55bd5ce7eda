#version 450
// Conv2d's columns (im2col): the input patches of samples first .. first + count - 1 laid out
// so that a convolution becomes a matrix product (ops/conv2d.cpp):
//   x (N, IC, H, W)  ->  columns (count, IC*KH*KW, OH*OW)
//   columns[z][(ic*KH + kh)*KW + kw][oh*OW + ow] = x[first + z][ic][oh*SH - PH + kh][ow*SW - PW + kw]
// with zero where the tap falls in the padding. One invocation per input channel and output
// pixel (x, flattened, so that workgroups are few and full), or per four consecutive output
// pixels with QUADS (OH*OW % 4 == 0, columns 16-byte aligned), writes its KH*KW taps; the
// sample is on z. FORMAT_X: how x is stored (shaders/formats.glsl); FORMAT_COLUMNS: how the
// columns are, 16 bits (the values of a 16-bit x, the same bits) only with QUADS.
#extension GL_GOOGLE_include_directive : require
#include "conv.h"
#include "formats.glsl"

layout(local_size_x = BRIGADE_WG_CONV) in;
layout(constant_id = 0) const bool QUADS = false;
#include "conv_geometry.glsl"
BRIGADE_FORMAT(11, FORMAT_X);
BRIGADE_FORMAT(12, FORMAT_COLUMNS);

layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 0) readonly buffer XW { uint xw[]; };
layout(binding = 1) writeonly buffer Columns { float columns[]; };
layout(binding = 1) writeonly buffer Columns4 { vec4 columns4[]; };
layout(binding = 1) writeonly buffer ColumnsQ { uvec2 columns_q[]; };  // a quad of 16-bit columns
layout(push_constant) uniform Push { Conv2dColumnsPush p; };
#include "conv_tap.glsl"

void column_item(uint i) {
  const Conv2dPush c = p.conv;
  const uint per = QUADS ? 4 : 1;
  const uint pixels = OH * OW;
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
        const vec4 v = vec4(tap(plane, ih0.x + int(kh), iw0.x + int(kw)), tap(plane, ih0.y + int(kh), iw0.y + int(kw)),
                            tap(plane, ih0.z + int(kh), iw0.z + int(kw)), tap(plane, ih0.w + int(kh), iw0.w + int(kw)));
        if (FORMAT_COLUMNS == BRIGADE_FORMAT_FP32) columns4[at >> 2] = v;
        else columns_q[at >> 2] = quad_out(v, FORMAT_COLUMNS);
      } else {
        columns[at] = tap(plane, ih0.x + int(kh), iw0.x + int(kw));
      }
    }
}

// The grid's x is capped at 65535 workgroups (a sample's IC * OH * OW is the model's, not the
// micro-batch's): each invocation walks the items in steps of the grid.
void main() {
  const uint items = p.conv.ic * (OH * OW / (QUADS ? 4 : 1));
  for (uint i = gl_GlobalInvocationID.x; i < items; i += gl_NumWorkGroups.x * BRIGADE_WG_CONV) column_item(i);
}
