// Reading and writing tensors kept in a storage format (shaders/precision.h): fp32, or 16
// bits packed two to a 32-bit word, element 2i in the low half. A kernel that reads a 16-bit
// tensor itself sees exactly the fp32 values an unpack would have given it, and one that
// stores 16 bits rounds as a pack would: the same bits as converting around an fp32 kernel.
#ifndef BRIGADE_SHADERS_FORMATS_GLSL
#define BRIGADE_SHADERS_FORMATS_GLSL
#include "precision.h"

// A storage format a kernel takes: a specialization constant in the kernel's 16-bit builds
// (cmake/shaders.cmake compiles NAME_bf16 and NAME_fp16 with BRIGADE_FORMATS and BRIGADE_HALF
// the one 16-bit type each holds: fp32 or that type; NAME_half, for a dispatch that mixes
// the two, without BRIGADE_HALF), fp32 at compile time in its plain build.
// A build holds only the conversions it can take: lavapipe translates a module's whole code
// for every pipeline, before specialization removes what is unused, so a smaller module is a
// faster pipeline creation (the matrix kernel's bf16 build is 55 % of one for both types; a
// bf16 pipeline case of the suite took a quarter less CPU time: docs/BENCHMARKS.md).
#ifdef BRIGADE_FORMATS
#define BRIGADE_FORMAT(id, name) layout(constant_id = id) const uint name = BRIGADE_FORMAT_FP32
#else
#define BRIGADE_FORMAT(id, name) const uint name = BRIGADE_FORMAT_FP32
#endif

// The 16 bits of `format` (never fp32: the callers keep fp32 apart), to fp32 and back; in a
// build for one 16-bit type, that type whatever `format` says (ops::format_kernel chose it).
#ifdef BRIGADE_HALF
#define BRIGADE_HALF_TYPE(format) BRIGADE_HALF
#else
#define BRIGADE_HALF_TYPE(format) format
#endif
float from_half(uint h, uint format) { return uintBitsToFloat(bits_from_half(h, BRIGADE_HALF_TYPE(format))); }
uint to_half(float v, uint format) { return half_from_bits(floatBitsToUint(v), BRIGADE_HALF_TYPE(format)); }

// Element i of a packed tensor, from the word that holds it (word i / 2).
float half_in(uint word, uint i, uint format) {
  return from_half((i & 1u) != 0u ? word >> 16u : word & 0xFFFFu, format);
}

// The two elements a word holds (elements 2w, 2w + 1), and the word that holds two.
vec2 pair_in(uint w, uint format) { return vec2(from_half(w & 0xFFFFu, format), from_half(w >> 16u, format)); }
uint pair_out(float lo, float hi, uint format) { return to_half(lo, format) | (to_half(hi, format) << 16u); }

// Four consecutive elements from the two words that hold them (a uvec2 at element 4q).
vec4 quad_in(uvec2 w, uint format) { return vec4(pair_in(w.x, format), pair_in(w.y, format)); }
uvec2 quad_out(vec4 v, uint format) { return uvec2(pair_out(v.x, v.y, format), pair_out(v.z, v.w, format)); }

// v as the format keeps it, held in an fp32.
float rounded(float v, uint format) {
  if (format == BRIGADE_FORMAT_FP32) return v;
  return from_half(to_half(v, format), format);
}
vec4 rounded(vec4 v, uint format) {
  if (format == BRIGADE_FORMAT_FP32) return v;
  return vec4(rounded(v.x, format), rounded(v.y, format), rounded(v.z, format), rounded(v.w, format));
}

#endif
