// Causal multi-head self-attention core (nanoGPT's CausalSelfAttention between c_attn and
// c_proj): push constants, specialization ids and workgroup sizes, shared by the GLSL kernels
// and their C++ launcher. Plain 32-bit scalars only, so std430 and C++ layouts agree.
//
// The products themselves run on matmul.comp, batched over z = b*NH + h. These kernels do
// what a matmul cannot: move heads between the token layout and a packed per-head layout,
// and the row-wise softmax with its causal mask.
//
// Layouts: a token tensor (B,T,row) holds `parts` tensors of C = NH*HS channels side by side
// in each row (qkv: q, k, v; y: one); head h of part p uses channels p*C + h*HS .. +HS-1.
// The heads layout (parts, B,NH,T,HS) packs each head's rows, so every (b, h) starts at a
// uniform stride (a matmul batch stride); parts are `part_stride` floats apart.
// Scores (B,NH,T,T); per-row statistics (B,NH,T).
//
// Every kernel takes `first`, the sample its batch index 0 stands for in the token tensors
// and lse: the launcher works through samples in chunks that fit its scratch, while the
// views it binds stay at their (aligned) offsets.
#ifndef BRIGADE_SHADERS_ATTENTION_H
#define BRIGADE_SHADERS_ATTENTION_H

#ifdef __cplusplus
#include <cstdint>
namespace brigade::shaders {
using uint = std::uint32_t;
#endif

// attention_gather_heads / attention_scatter_heads: one (t, d) element of one head per
// invocation; heads and samples on y, parts on z.
#define BRIGADE_WG_ATTENTION_HEADS 256
// attention_softmax / attention_softmax_backward: one score row per invocation, heads and
// samples on y. (On lavapipe every load is a loop over the SIMD lanes whatever its address,
// so a row per lane costs no more than lanes along a row, and needs no reduction.)
#define BRIGADE_WG_ATTENTION_ROWS 64

// attention_scatter_heads: add into the token tensor instead of overwriting it.
#define BRIGADE_ATTENTION_SPEC_ACCUMULATE 0
// attention_gather_heads / attention_scatter_heads: move vec4s, each buffer bound both as
// floats and as vec4s (HS, row and part_stride multiples of 4, views 16-byte aligned).
// lavapipe runs every load as a loop over the SIMD lanes, so a vec4 costs about what a
// float does.
#define BRIGADE_ATTENTION_SPEC_VEC4 1

struct AttentionHeadsPush {
  uint B, T, NH, HS;  // B: samples in this chunk
  uint row;           // floats per token row of the token tensor
  uint part_stride;   // floats between parts in the heads layout
  uint first;         // sample of the token tensor that batch index 0 stands for
};

struct AttentionSoftmaxPush {
  uint B, T, NH, HS;  // B: samples in this chunk
  uint first;         // sample of lse (and dy, y) that batch index 0 stands for
};

// The row kernels (attention_rows_*), the form SwiftShader runs (ops/form.h): one query (or
// key) row per invocation, heads and samples on y and z, straight from the token layouts.
// The head size is a specialization constant, so each row's vectors (q, k, v, accumulators)
// are private arrays of exactly ceil(HS/4) vec4s; BRIGADE_ATTENTION_SPEC_VEC4 as above (each
// row buffer bound as floats and as vec4s).
#define BRIGADE_WG_ATTENTION 64
#define BRIGADE_ATTENTION_SPEC_HS 0
// Largest head size the row kernels accept (GPT-2 uses 64; each invocation keeps a few
// HS-float arrays in registers, so much larger heads would spill).
#define BRIGADE_ATTENTION_MAX_HS 256

struct AttentionPush {
  uint B, T, C, NH;
  float scale;  // 1/sqrt(HS)
};

#ifdef __cplusplus
}  // namespace brigade::shaders
#endif
#endif
