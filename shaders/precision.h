// 16-bit storage formats: bf16 (the upper half of an fp32) and IEEE fp16, both rounded to
// nearest with ties to even, in integer arithmetic written once in the common subset of GLSL
// and C++, so the kernels and the CPU reference round every value to the same bits on every
// device. Two values are packed to a 32-bit word, element 2i in the low half.
#ifndef BRIGADE_SHADERS_PRECISION_H
#define BRIGADE_SHADERS_PRECISION_H

#ifdef __cplusplus
#include <algorithm>
#include <bit>
#include <cstdint>
namespace brigade::shaders {
using uint = std::uint32_t;
using std::max;
using std::min;
#define BRIGADE_FN inline
#define BRIGADE_FLOAT_BITS(f) std::bit_cast<uint>(float(f))
#else
#define BRIGADE_FN
#define BRIGADE_FLOAT_BITS(f) floatBitsToUint(float(f))
#endif

// Storage formats (specialization constant FORMAT of the precision kernels).
#define BRIGADE_FORMAT_FP32 0
#define BRIGADE_FORMAT_BF16 1
#define BRIGADE_FORMAT_FP16 2

// Threads per workgroup of the precision kernels; each invocation handles one word (two
// elements).
#define BRIGADE_WG_PRECISION 256

struct PrecisionPush {
  uint n;  // elements (the packed side holds (n + 1) / 2 words)
};

// The branch-free choice of a or b: an OpSelect in a shader. The conversions below are inlined
// at every 16-bit load and store of the kernels, so they compute each case and select one
// rather than branch: CPU drivers compile a branch into masked paths of every lane (an fp16
// pipeline case of the suite took 0.73 times the CPU time on lavapipe without them:
// docs/BENCHMARKS.md, "Timestamps reset as written, and conversions without branches").
#ifdef __cplusplus
#define BRIGADE_SELECT(c, a, b) ((c) ? (a) : (b))
#else
#define BRIGADE_SELECT(c, a, b) mix((b), (a), (c))
#endif

// fp32 bits to bf16 bits. A NaN stays a (quiet) NaN rather than rounding into infinity.
BRIGADE_FN uint bf16_from_bits(uint u) {
  return BRIGADE_SELECT((u & 0x7FFFFFFFu) > 0x7F800000u, (u >> 16u) | 0x40u, (u + 0x7FFFu + ((u >> 16u) & 1u)) >> 16u);
}

BRIGADE_FN uint bits_from_bf16(uint h) { return h << 16u; }

// fp32 bits to fp16 bits: past the largest finite fp16 (65504) rounds to infinity, below the
// smallest normal (2^-14) to a subnormal, below half the smallest subnormal (2^-25) to zero.
// Every case is computed and the right one selected.
BRIGADE_FN uint fp16_from_bits(uint u) {
  const uint sign = (u >> 16u) & 0x8000u;
  const uint a = u & 0x7FFFFFFFu;
  // A normal: the exponent rebiased 127 -> 15, rounded to nearest even at bit 13.
  const uint r = a - 0x38000000u;
  const uint normal = (r + 0xFFFu + ((r >> 13u) & 1u)) >> 13u;
  // A subnormal, m * 2^(e - 126) in units of 2^-24, rounded to nearest even; e kept within
  // 102 .. 112 so the shift stays in range where the value is not one.
  const uint e = min(max(a >> 23u, 102u), 112u), shift = 126u - e;
  const uint m = (a & 0x7FFFFFu) | 0x800000u;
  const uint sub = (m + ((1u << (shift - 1u)) - 1u) + ((m >> shift) & 1u)) >> shift;
  uint h = BRIGADE_SELECT(a >= 0x38800000u, normal, sub);
  h = BRIGADE_SELECT(a <= 0x33000000u, 0u, h);       // at most 2^-25: zero (a tie goes to even)
  h = BRIGADE_SELECT(a >= 0x477FF000u, 0x7C00u, h);  // rounds past 65504: infinity
  h = BRIGADE_SELECT(a > 0x7F800000u, 0x7E00u, h);   // NaN
  return sign | h;
}

BRIGADE_FN uint bits_from_fp16(uint h) {
  const uint sign = (h & 0x8000u) << 16u;
  const uint e = (h >> 10u) & 0x1Fu, m = h & 0x3FFu;
  // Infinity and NaN keep fp32's top exponent; a normal is rebiased 15 -> 127.
  const uint normal = (BRIGADE_SELECT(e == 31u, 255u, e + 112u) << 23u) | (m << 13u);
  // A subnormal (or zero): m * 2^-24, exact in fp32 (m < 2^10, a power-of-two scale).
  const uint sub = BRIGADE_FLOAT_BITS(float(m) * 5.9604644775390625e-8);
  return sign | BRIGADE_SELECT(e == 0u, sub, normal);
}

// fp32 bits to the 16 bits of `format`, and back.
BRIGADE_FN uint half_from_bits(uint u, uint format) {
  return format == BRIGADE_FORMAT_FP16 ? fp16_from_bits(u) : bf16_from_bits(u);
}
BRIGADE_FN uint bits_from_half(uint h, uint format) {
  return format == BRIGADE_FORMAT_FP16 ? bits_from_fp16(h) : bits_from_bf16(h);
}

#undef BRIGADE_FN
#undef BRIGADE_FLOAT_BITS

#ifdef __cplusplus
}  // namespace brigade::shaders
#endif
#endif
