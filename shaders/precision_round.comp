#version 450
// x[i] = the value x[i] keeps in FORMAT (rounded to nearest, ties to even), in place.
// x: (n) floats
#extension GL_GOOGLE_include_directive : require
#include "precision.h"

layout(local_size_x = BRIGADE_WG_PRECISION) in;
layout(constant_id = 0) const uint FORMAT = BRIGADE_FORMAT_BF16;
layout(binding = 0) buffer X { float x[]; };
layout(push_constant) uniform Push { PrecisionPush p; };

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride)
    x[i] = uintBitsToFloat(bits_from_half(half_from_bits(floatBitsToUint(x[i]), FORMAT), FORMAT));
}
