// Element-wise layers (ReLU, GELU, residual add, dropout): push constants, workgroup size
// and the dropout RNG, shared by the GLSL kernels, their C++ launchers and the CPU
// references. Plain 32-bit scalars only, so std430 push-constant layout and C++ agree.
#ifndef BRIGADE_SHADERS_ELEMENTWISE_H
#define BRIGADE_SHADERS_ELEMENTWISE_H

#ifdef __cplusplus
#include <cstdint>
namespace brigade::shaders {
using uint = std::uint32_t;
#endif

// Threads per workgroup of the element-wise kernels.
#define BRIGADE_WG_ELEMENTWISE 256
// Dropout kernels handle this many consecutive elements per invocation: one Philox call
// yields four 32-bit words.
#define BRIGADE_DROPOUT_PER_THREAD 4
// Launchers dispatch at most this many workgroups along x (the limit every device
// supports); kernels loop over the rest with a grid stride.
#define BRIGADE_MAX_GROUPS_X 65535

// relu, gelu and residual add over n elements.
struct ElementwisePush {
  uint n;
};

// Dropout over n elements. An element is kept when its 32 random bits are >= threshold
// (= round(p * 2^32)), so it is kept with probability 1 - p; kept elements are scaled by
// 1 / (1 - p). The bits are a pure function of (seed, step, micro_batch, layer, index).
struct DropoutPush {
  uint n;
  uint threshold;
  float scale;
  uint seed_lo;
  uint seed_hi;
  uint step;
  uint micro_batch;
  uint layer;
};

// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
// counter-based generator of cuRAND and PyTorch. Written once in the common subset of GLSL
// and C++ so the GPU and the CPU reference draw bit-identical masks.
#ifdef __cplusplus
struct uvec4 {
  // GLSL's uvec4(x, y, z, w), spelled out: clang before 16 lacks C++20's parenthesized
  // aggregate initialization.
  constexpr uvec4(uint x_, uint y_, uint z_, uint w_) : x(x_), y(y_), z(z_), w(w_) {}
  uint x, y, z, w;
};
inline void philox_mulhilo(uint a, uint b, uint& hi, uint& lo) {
  const std::uint64_t product = std::uint64_t(a) * b;
  hi = uint(product >> 32);
  lo = uint(product);
}
#define BRIGADE_FN inline
#else
void philox_mulhilo(uint a, uint b, out uint hi, out uint lo) { umulExtended(a, b, hi, lo); }
#define BRIGADE_FN
#endif

BRIGADE_FN uvec4 philox4x32_10(uvec4 counter, uint key0, uint key1) {
  for (int r = 0; r < 10; ++r) {
    uint hi0, lo0, hi1, lo1;
    philox_mulhilo(0xD2511F53u, counter.x, hi0, lo0);
    philox_mulhilo(0xCD9E8D57u, counter.z, hi1, lo1);
    counter = uvec4(hi1 ^ counter.y ^ key0, lo1, hi0 ^ counter.w ^ key1, lo0);
    key0 += 0x9E3779B9u;  // the Weyl key schedule
    key1 += 0xBB67AE85u;
  }
  return counter;
}

// The four random words for elements 4q .. 4q+3 of a dropout mask: the counter is
// (q, micro_batch, step, layer) and the key is the 64-bit seed.
BRIGADE_FN uvec4 dropout_words(DropoutPush p, uint q) {
  return philox4x32_10(uvec4(q, p.micro_batch, p.step, p.layer), p.seed_lo, p.seed_hi);
}

BRIGADE_FN uint uvec4_word(uvec4 v, uint j) {
  return j == 0u ? v.x : j == 1u ? v.y : j == 2u ? v.z : v.w;
}

#undef BRIGADE_FN

#ifdef __cplusplus
}  // namespace brigade::shaders
#endif
#endif
