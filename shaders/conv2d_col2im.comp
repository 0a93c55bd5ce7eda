#version 450
// The reverse of conv2d_im2col: each input element of samples first .. first + count - 1
// gathers the column entries that were copied from it.
//   columns (count, IC*KH*KW, OH*OW)  ->  dx (N, IC, H, W), accumulated
// One invocation per input element, or per four consecutive ones with QUADS (H*W % 4 == 0, dx
// 16-byte aligned), channels and pixels flattened on x and the sample on z, adds its taps in
// a fixed order: deterministic, no atomics.
#extension GL_GOOGLE_include_directive : require
#include "conv.h"
#include "formats.glsl"

layout(local_size_x = BRIGADE_WG_CONV) in;
layout(constant_id = 0) const bool QUADS = false;
#include "conv_geometry.glsl"
// dx holds fp32 values rounded to this format (its input's precision).
BRIGADE_FORMAT(11, ROUND);

layout(binding = 0) readonly buffer Columns { float columns[]; };
layout(binding = 1) buffer DX { float dx[]; };
layout(binding = 1) buffer DX4 { vec4 dx4[]; };
layout(push_constant) uniform Push { Conv2dColumnsPush p; };

// The sum of the column entries copied from input element (ih, iw), in padded coordinates,
// of the plane of taps that starts at base.
float gathered(uint base, uint ih, uint iw) {
  const uint pixels = OH * OW;
  float sum = 0.0;
  for (uint kh = 0; kh < KH && kh <= ih; ++kh) {
    const uint rh = ih - kh;
    if (rh % SH != 0 || rh / SH >= OH) continue;
    for (uint kw = 0; kw < KW && kw <= iw; ++kw) {
      const uint rw = iw - kw;
      if (rw % SW != 0 || rw / SW >= OW) continue;
      sum += columns[base + (kh * KW + kw) * pixels + (rh / SH) * OW + rw / SW];
    }
  }
  return sum;
}

void gather_item(uint i) {
  const Conv2dPush c = p.conv;
  const uint per = QUADS ? 4 : 1;
  const uint plane = H * W;
  const uint ic = i / (plane / per), pixel = (i % (plane / per)) * per, z = gl_WorkGroupID.z;
  const uint base = (z * c.ic + ic) * KH * KW * OH * OW;
  const uint at = ((p.first + z) * c.ic + ic) * plane + pixel;
  vec4 sums = vec4(0.0);
  for (uint q = 0; q < per; ++q)  // padded coordinates
    sums[q] = gathered(base, (pixel + q) / W + PH, (pixel + q) % W + PW);
  if (QUADS)
    dx4[at >> 2] = rounded(dx4[at >> 2] + sums, ROUND);
  else
    dx[at] = rounded(dx[at] + sums.x, ROUND);
}

// The grid's x is capped at 65535 workgroups (a sample's IC * H * W is the model's, not the
// micro-batch's): each invocation walks the items in steps of the grid.
void main() {
  const uint items = p.conv.ic * (H * W / (QUADS ? 4 : 1));
  for (uint i = gl_GlobalInvocationID.x; i < items; i += gl_NumWorkGroups.x * BRIGADE_WG_CONV) gather_item(i);
}
