#version 450
// packed[i] = the 16-bit values of x[2i] (low half) and x[2i + 1] (high half) in FORMAT;
// with ROUND, x is also overwritten with the values its 16 bits stand for, so later kernels
// read exactly what was kept.  x: (n) floats, packed: ((n + 1) / 2) words
// With VEC4 (n a multiple of 4, x 16-byte and packed 8-byte aligned) an invocation takes a
// quad: four values, two words.
#extension GL_GOOGLE_include_directive : require
#include "precision.h"

layout(local_size_x = BRIGADE_WG_PRECISION) in;
layout(constant_id = 0) const uint FORMAT = BRIGADE_FORMAT_BF16;
layout(constant_id = 1) const bool ROUND = false;
layout(constant_id = 2) const bool VEC4 = false;
layout(binding = 0) buffer X { float x[]; };
layout(binding = 0) buffer X4 { vec4 x4[]; };
layout(binding = 1) writeonly buffer Packed { uint packed[]; };
layout(binding = 1) writeonly buffer Packed2 { uvec2 packed2[]; };
layout(push_constant) uniform Push { PrecisionPush p; };

void main() {
  if (VEC4) {
    const uint quads = p.n / 4, stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint q = gl_GlobalInvocationID.x; q < quads; q += stride) {
      const uvec4 bits = floatBitsToUint(x4[q]);
      const uvec4 h = uvec4(half_from_bits(bits.x, FORMAT), half_from_bits(bits.y, FORMAT),
                            half_from_bits(bits.z, FORMAT), half_from_bits(bits.w, FORMAT));
      packed2[q] = uvec2(h.x | (h.y << 16), h.z | (h.w << 16));
      if (ROUND)
        x4[q] = uintBitsToFloat(uvec4(bits_from_half(h.x, FORMAT), bits_from_half(h.y, FORMAT),
                                      bits_from_half(h.z, FORMAT), bits_from_half(h.w, FORMAT)));
    }
    return;
  }
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
