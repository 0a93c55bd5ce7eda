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
// vector (q, k, v, accumulators) is a register array of exactly HS floats.
#define BRIGADE_ATTENTION_SPEC_HS 0
// Keys scored per step of the forward's online softmax: the running output is rescaled
// once per block instead of once per key.
#define BRIGADE_ATTENTION_SPEC_KEY_BLOCK 1

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
