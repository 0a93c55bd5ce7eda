#version 450
// x[2i], x[2i + 1] = the values of the two 16-bit halves of packed[i] in FORMAT.
// packed: ((n + 1) / 2) words, x: (n) floats
#extension GL_GOOGLE_include_directive : require
#include "precision.h"

layout(local_size_x = BRIGADE_WG_PRECISION) in;
layout(constant_id = 0) const uint FORMAT = BRIGADE_FORMAT_BF16;
layout(binding = 0) readonly buffer Packed { uint packed[]; };
layout(binding = 1) writeonly buffer X { float x[]; };
layout(push_constant) uniform Push { PrecisionPush p; };

void main() {
  const uint words = (p.n + 1) / 2, stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint w = gl_GlobalInvocationID.x; w < words; w += stride) {
    const uint word = packed[w];
    x[2 * w] = uintBitsToFloat(bits_from_half(word & 0xFFFFu, FORMAT));
    if (2 * w + 1 < p.n) x[2 * w + 1] = uintBitsToFloat(bits_from_half(word >> 16, FORMAT));
  }
}
