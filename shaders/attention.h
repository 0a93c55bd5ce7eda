// Causal multi-head self-attention core (nanoGPT's CausalSelfAttention between c_attn and
// c_proj): push constants, specialization ids and workgroup sizes, shared by the GLSL kernels
// and their C++ launcher. Plain 32-bit scalars only, so std430 and C++ layouts agree.
//
// The products themselves run on matmul.comp, batched over z = b*NH + h and reading each
// head where it lies in the token tensors (matmul's grid of matrices). These kernels do what a
// matmul cannot: the row-wise softmax with its causal mask.
//
// Layouts: a token tensor (B,T,row) holds `parts` tensors of C = NH*HS channels side by side
// in each row (qkv: q, k, v; y: one); head h of part p uses channels p*C + h*HS .. +HS-1.
// Scores (B,NH,T,T); per-row statistics (B,NH,T).
//
// The softmax kernels take `first` and `head`, the sample and head their batch index 0 stands
// for in the token tensors and lse: the launcher works through the heads in chunks that fit its
// scratch (whole samples, or heads of one), while the views it binds stay at their (aligned)
// offsets.
#ifndef BRIGADE_SHADERS_ATTENTION_H
#define BRIGADE_SHADERS_ATTENTION_H

#ifdef __cplusplus
#include <cstdint>
namespace brigade::shaders {
using uint = std::uint32_t;
#endif

// attention_softmax / attention_softmax_backward: one score row per invocation, heads and
// samples on y. (On lavapipe every load is a loop over the SIMD lanes whatever its address,
// so a row per lane costs no more than lanes along a row, and needs no reduction.)
#define BRIGADE_WG_ATTENTION_ROWS 64

// The row kernels: move vec4s, each row buffer bound both as floats and as vec4s (HS a
// multiple of 4, views 16-byte aligned).
#define BRIGADE_ATTENTION_SPEC_VEC4 1
// attention_softmax_backward: how y is stored (shaders/formats.glsl, its 16-bit builds).
#define BRIGADE_ATTENTION_SPEC_FORMAT_Y 2
// The softmax kernels with VEC4, in their 16-bit builds: where P (and in the backward dS) go,
// fp32 over the scores as computed, or packed to this 16-bit format into bindings of their
// own, for the products that read them packed (the fp32 values are then not written).
#define BRIGADE_ATTENTION_SPEC_FORMAT_P 12

struct AttentionSoftmaxPush {
  uint B, T, NH, HS;  // B: batch indices (heads) in this chunk
  uint first;         // sample of lse (and dy, y) that batch index 0 stands for
  uint head;          // and its head: a chunk of one sample's heads starts past 0
};

// The row kernels (attention_rows_*), the form SwiftShader runs (ops/form.h): one query (or
// key) row per invocation, heads and samples (from AttentionPush::first) on y and z, straight
// from the token layouts.
// The head size is a specialization constant, so each row's vectors (q, k, v, accumulators)
// are private arrays of exactly ceil(HS/4) vec4s; BRIGADE_ATTENTION_SPEC_VEC4 as above.
#define BRIGADE_WG_ATTENTION 64
#define BRIGADE_ATTENTION_SPEC_HS 0
// Form::Fused, the row kernels staged: a workgroup's invocations copy a block of BC rows of
// the other side (keys and values, or queries and output gradients) into shared memory, then
// each walks the block's rows it needs from there; blocks in order, rows in order, so each
// row's sums run exactly as unstaged.
#define BRIGADE_ATTENTION_SPEC_STAGED 3
#define BRIGADE_ATTENTION_SPEC_BC 4
// Largest head size the row kernels accept (GPT-2 uses 64; each invocation keeps a few
// HS-float arrays in registers, so much larger heads would spill).
#define BRIGADE_ATTENTION_MAX_HS 256

// attention_tiles_forward: flash attention's forward on matrix units (ops/attention_tiles.h),
// 16-bit qkv and y of one storage format. HS and BC as above (BC: keys a block), and the
// tiles' shape: LM x LK times LK x LN matrices, warps of LANES invocations, WARPS warps of LM
// query rows a workgroup.
#define BRIGADE_ATTENTION_TILES_SPEC_WG 5  // invocations: WARPS * LANES
#define BRIGADE_ATTENTION_TILES_SPEC_LM 6
#define BRIGADE_ATTENTION_TILES_SPEC_LN 7
#define BRIGADE_ATTENTION_TILES_SPEC_LK 8
#define BRIGADE_ATTENTION_TILES_SPEC_LANES 9
#define BRIGADE_ATTENTION_TILES_SPEC_WARPS 10
#define BRIGADE_ATTENTION_TILES_SPEC_FORMAT 11
// The backward's passes also write dqkv's parts packed to FORMAT into the binding after their
// others, as a pack of the fp32 values gives (a GPT block's products read that copy).
#define BRIGADE_ATTENTION_TILES_SPEC_COPY 12
// Elements of padding a shared row of 16-bit elements has past its data (a multiple of 8).
#define BRIGADE_ATTENTION_TILES_PAD 8

// B: samples in the tensors; first: the sample workgroup z = 0 stands for (a dispatch takes
// at most a grid's limit of samples on z, so the launchers walk the rest in several).
struct AttentionPush {
  uint B, T, C, NH;
  float scale;  // 1/sqrt(HS)
  uint first;
};

#ifdef __cplusplus
}  // namespace brigade::shaders
#else
// The softmax kernels with VEC4: which of keys 4q .. 4q + 3 row i's causal mask keeps.
bvec4 keys_kept(uint q, uint i) { return lessThanEqual(uvec4(4 * q) + uvec4(0, 1, 2, 3), uvec4(i)); }
#endif
#endif
