// Causal multi-head self-attention core (nanoGPT's CausalSelfAttention between c_attn and
// c_proj): push constants, specialization ids and workgroup size, shared by the GLSL kernels
// and their C++ launchers. Plain 32-bit scalars only, so std430 and C++ layouts agree.
//
// Layouts: qkv (B,T,3C) holds q, k, v side by side in each row; head h of q uses channels
// h*HS .. h*HS+HS-1 (k and v likewise, offset by C and 2C). y (B,T,C) has the heads
// concatenated. Per-row statistics (B,NH,T).
#ifndef BRIGADE_SHADERS_ATTENTION_H
#define BRIGADE_SHADERS_ATTENTION_H

#ifdef __cplusplus
#include <cstdint>
namespace brigade::shaders {
using uint = std::uint32_t;
#endif

// Query (or key) rows per workgroup: one row per invocation, heads and batch on y and z.
#define BRIGADE_WG_ATTENTION 64

// Specialization constant ids. The head size is a specialization constant so every per-row
// vector (q, k, v, accumulators) is a private array of exactly ceil(HS/4) vec4s.
#define BRIGADE_ATTENTION_SPEC_HS 0
// True when every head row starts 16-byte aligned (HS a multiple of 4, views aligned): rows
// are then read and written as vec4s, else float by float. Each row buffer is bound twice, as
// floats and as vec4s: lavapipe runs every load instruction as a loop over the SIMD lanes, so
// one vec4 load costs about what one float load does (the kernels ran 2x faster with them).
#define BRIGADE_ATTENTION_SPEC_VEC4 1

// Largest head size the kernels accept (GPT-2 uses 64; each invocation keeps a few HS-float
// arrays in registers, so much larger heads would spill).
#define BRIGADE_ATTENTION_MAX_HS 256

struct AttentionPush {
  uint B, T, C, NH;
  float scale;  // 1/sqrt(HS)
};

#ifdef __cplusplus
}  // namespace brigade::shaders
#endif
#endif
