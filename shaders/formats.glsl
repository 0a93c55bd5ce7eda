// Reading and writing tensors kept in a storage format (shaders/precision.h): fp32, or 16
// bits packed two to a 32-bit word, element 2i in the low half. A kernel that reads a 16-bit
// tensor itself sees exactly the fp32 values an unpack would have given it, and one that
// stores 16 bits rounds as a pack would: the same bits as converting around an fp32 kernel.
#ifndef BRIGADE_SHADERS_FORMATS_GLSL
#define BRIGADE_SHADERS_FORMATS_GLSL
#include "precision.h"

// A storage format a kernel takes: a specialization constant in the kernel's _half build
// (cmake/shaders.cmake compiles it with BRIGADE_FORMATS), fp32 at compile time in its plain
// build, which then holds none of the 16-bit code (smaller SPIR-V, faster pipeline creation).
#ifdef BRIGADE_FORMATS
#define BRIGADE_FORMAT(id, name) layout(constant_id = id) const uint name = BRIGADE_FORMAT_FP32
#else
#define BRIGADE_FORMAT(id, name) const uint name = BRIGADE_FORMAT_FP32
#endif

float from_half(uint h, uint format) { return uintBitsToFloat(bits_from_half(h, format)); }
uint to_half(float v, uint format) { return half_from_bits(floatBitsToUint(v), format); }

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
