#version 450
// packed[i] = the 16-bit values of x[2i] (low half) and x[2i + 1] (high half) in FORMAT;
// with ROUND, x is also overwritten with the values its 16 bits stand for, so later kernels
// read exactly what was kept.  x: (n) floats, packed: ((n + 1) / 2) words
#extension GL_GOOGLE_include_directive : require
#include "precision.h"

layout(local_size_x = BRIGADE_WG_PRECISION) in;
layout(constant_id = 0) const uint FORMAT = BRIGADE_FORMAT_BF16;
layout(constant_id = 1) const bool ROUND = false;
layout(binding = 0) buffer X { float x[]; };
layout(binding = 1) writeonly buffer Packed { uint packed[]; };
layout(push_constant) uniform Push { PrecisionPush p; };

void main() {
  const uint words = (p.n + 1) / 2, stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint w = gl_GlobalInvocationID.x; w < words; w += stride) {
    const uint lo = half_from_bits(floatBitsToUint(x[2 * w]), FORMAT);
    const bool pair = 2 * w + 1 < p.n;
    const uint hi = pair ? half_from_bits(floatBitsToUint(x[2 * w + 1]), FORMAT) : 0u;
    packed[w] = lo | (hi << 16);
    if (ROUND) {
      x[2 * w] = uintBitsToFloat(bits_from_half(lo, FORMAT));
      if (pair) x[2 * w + 1] = uintBitsToFloat(bits_from_half(hi, FORMAT));
    }
  }
}
