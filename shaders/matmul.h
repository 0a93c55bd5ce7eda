// Matmul and Linear: push constants, specialization-constant ids and workgroup sizes, shared
// by the GLSL kernels and their C++ launchers. Plain 32-bit scalars only, so the std430
// push-constant layout and the C++ layout agree.
#ifndef BRIGADE_SHADERS_MATMUL_H
#define BRIGADE_SHADERS_MATMUL_H

#ifdef __cplusplus
#include <cstdint>
namespace brigade::shaders {
using uint = std::uint32_t;
#endif

// Specialization constants of matmul.comp (register blocks) and matmul_shared.comp
// (shared-memory tiles). The tiling is chosen per device at run time (ops::matmul_tiling);
// the transposes and vec4 flags per call. Id 0 is unused.
#define BRIGADE_MATMUL_SPEC_WG_X 1     // invocations per workgroup along N
#define BRIGADE_MATMUL_SPEC_WG_Y 2     // invocations per workgroup along M
#define BRIGADE_MATMUL_SPEC_TM 3       // outputs per invocation along M
#define BRIGADE_MATMUL_SPEC_TN 4       // outputs per invocation along N
#define BRIGADE_MATMUL_SPEC_BK 5       // shared tiles: K depth of a staged tile
#define BRIGADE_MATMUL_SPEC_TRANS_A 6  // A is stored (K,M) instead of (M,K)
#define BRIGADE_MATMUL_SPEC_TRANS_B 7  // B is stored (N,K) instead of (K,N)
#define BRIGADE_MATMUL_SPEC_VEC4_A 8   // load A as vec4 (alignment checked)
#define BRIGADE_MATMUL_SPEC_VEC4_B 9   // load B as vec4
#define BRIGADE_MATMUL_SPEC_SUBGROUP 10 // register variant: subgroups of this size share A (0: off)
#define BRIGADE_MATMUL_SPEC_BIAS 11     // 0: no bias; 1: add bias[n] to every row of C; 2: bias[m] to every column
#define BRIGADE_MATMUL_SPEC_EPILOGUE 12 // what is done to each value as C is stored: BRIGADE_MATMUL_EPILOGUE_*
#define BRIGADE_MATMUL_SPEC_K_TAIL 13   // register variant with vec4 loads: K % 4 != 0, the last k one by one
#define BRIGADE_MATMUL_SPEC_VEC4_C 14   // store C (and read bias, pre, act) as vec4
#define BRIGADE_MATMUL_SPEC_CAUSAL 15   // register variant: what of a causal product to leave out, BRIGADE_MATMUL_CAUSAL_*
#define BRIGADE_MATMUL_SPEC_FORMAT_A 16 // how A is stored: BRIGADE_FORMAT_* (shaders/precision.h)
#define BRIGADE_MATMUL_SPEC_FORMAT_B 17 // how B is stored
#define BRIGADE_MATMUL_SPEC_FORMAT_C 18 // how C is stored; 16 bits only with VEC4_C and no accumulation
#define BRIGADE_MATMUL_SPEC_ROUND_C 19  // C stored in fp32 holding values rounded to this format
#define BRIGADE_MATMUL_SPEC_FORMAT_E 20 // how the epilogue's tensor (pre or act) is stored; act as C is
// A 16-bit copy of an fp32 C as stored, rounded to this format, into binding 5 (laid out as C,
// two to a word; no GELU epilogue, whose act is there): a gradient packed for the products that
// read it, by the pass that writes it. Needs C's quads or pairs (VEC4_C, or pairs of a row).
#define BRIGADE_MATMUL_SPEC_FORMAT_COPY 21
// The staged kernels (shared and matrix tiles): a part of a split K, K_CHUNK deep (a multiple
// of the staged depth) from workgroup z's K_CHUNK z; 0, all of K. A constant, not a push
// constant, so a product unsplit compiles without it.
#define BRIGADE_MATMUL_SPEC_K_CHUNK 22
// The staged kernels: the order their workgroups take C's blocks in. 0 or 1, row after row of
// blocks; G, groups of G rows of blocks, each walked down its rows a column after another, so
// that the blocks a GPU runs at once share more of A's rows and B's columns in its cache.
#define BRIGADE_MATMUL_SPEC_GROUP 23

// Specialization constants of matmul_tiles.comp, the matrix-unit kernel, beside matmul.comp's
// TRANS_A, TRANS_B, BIAS, EPILOGUE and FORMAT_* (the same ids, the same meanings). Its tile
// is WARPS_M x WARPS_N warps of TILES_M x TILES_N matrices of LM x LN each, the matrix shape
// LM x LN x LK one the device lists (ops::matrix_tiling); a warp is a subgroup of LANES.
#define BRIGADE_TILES_SPEC_WG 30       // invocations per workgroup: WARPS_M * WARPS_N * LANES
#define BRIGADE_TILES_SPEC_LM 31
#define BRIGADE_TILES_SPEC_LN 32
#define BRIGADE_TILES_SPEC_LK 33
#define BRIGADE_TILES_SPEC_TILES_M 34
#define BRIGADE_TILES_SPEC_TILES_N 35
#define BRIGADE_TILES_SPEC_WARPS_M 36
#define BRIGADE_TILES_SPEC_WARPS_N 37
#define BRIGADE_TILES_SPEC_BK 38       // K depth of the tiles staged in shared memory (LK's multiple)
#define BRIGADE_TILES_SPEC_LANES 39
// How the warps' fragments are fed, BRIGADE_TILES_FEED_*: staged through shared memory (the
// product), or one of two measurements for `bench kernels` on a device with matrix units:
// the first K tile staged once and multiplied in place of every tile (the time of the warps'
// loads from shared memory and products alone, C wrong: the inner loop's ceiling), or each
// fragment loaded straight from A and B as stored, with no shared tiles and no barriers
// (whole blocks of 16-byte aligned rows only; C right).
#define BRIGADE_TILES_SPEC_FEED 40
#define BRIGADE_TILES_FEED_STAGED 0
#define BRIGADE_TILES_FEED_STAGE_ONCE 1
#define BRIGADE_TILES_FEED_DIRECT 2
// Copies of the staged tiles (1 or 2): with two, the next K tile goes to the other copy while
// this one multiplies, and one barrier a tile orders both.
#define BRIGADE_TILES_SPEC_STAGES 41
// K tiles in flight in registers while a tile multiplies (1 or 2; 2 with two copies only): with
// two, a tile's loads are issued two tiles before it is staged, so they have two tiles'
// products to arrive in rather than one.
#define BRIGADE_TILES_SPEC_AHEAD 42
// Elements between the rows of a staged 16-bit tile past its width: keeps each row's start
// 16-byte aligned, as cooperative-matrix loads want, and spreads rows over the banks.
#define BRIGADE_TILES_PAD 8

#define BRIGADE_MATMUL_BIAS_NONE 0
#define BRIGADE_MATMUL_BIAS_COLUMNS 1
#define BRIGADE_MATMUL_BIAS_ROWS 2

// Epilogues, applied per element of C (same index in the other tensor):
//   GELU:      C as usual, and gelu(C) into `act` (binding 5): a Linear and its activation
//   GELU_GRAD: C = the product times gelu'(pre) (pre: binding 4): the activation's backward
//   RELU:      C = relu(C), NaN passing (no other tensor): a Linear whose ReLU is folded in
// Causal attention's products (M = N or M = K, a row or column per token) leave out work
// whose result is known or never read, per block of an invocation's (or its subgroup's) rows:
//   SKIP_ABOVE: no product for blocks wholly above the diagonal (column > row); what C holds
//               there is unspecified (the scores' softmax never reads it)
//   K_TO_ROW:   op(A)[m][k] is 0 for k > m (P, dS): K stops after the block's last row
//   K_FROM_ROW: op(A)[m][k] is 0 for k < m (Pᵀ, dSᵀ): K starts at the block's first row
#define BRIGADE_MATMUL_CAUSAL_NONE 0
#define BRIGADE_MATMUL_CAUSAL_SKIP_ABOVE 1
#define BRIGADE_MATMUL_CAUSAL_K_TO_ROW 2
#define BRIGADE_MATMUL_CAUSAL_K_FROM_ROW 3

#define BRIGADE_MATMUL_EPILOGUE_NONE 0
#define BRIGADE_MATMUL_EPILOGUE_GELU 1
#define BRIGADE_MATMUL_EPILOGUE_GELU_GRAD 2
#define BRIGADE_MATMUL_EPILOGUE_RELU 3

// Per batch index z < batch (the dispatch's z dimension):
//   C[z] = alpha * sum over r < terms of op(A[z*terms + r]) op(B[z*terms + r])
//          (+ bias) (+ C[z] when accumulate != 0)
// with op(A) (M,K), op(B) (K,N), C (M,N); all row-major with leading dimensions lda, ldb, ldc
// and each operand's first element at offset_a, offset_b, offset_c. Matrix i of an operand
// starts (i / heads) * stride + (i % heads) * head_stride elements after its first (strides 0
// repeat one matrix): a grid of matrices, such as attention's heads side by side in each
// sample's token rows; heads = 1 is a plain batch stride. The sum over `terms` runs in order
// inside one invocation, so it is as deterministic as a longer K.
// K_CHUNK != 0 splits K (the staged kernels only, ops/matmul_split.h): workgroup z takes the
// K range [z K_CHUNK, (z + 1) K_CHUNK) of one product (A's and B's strides 0) and stores its
// partial sum, alpha times it, as C[z]; a second pass adds the parts in order.
struct MatmulPush {
  uint M, N, K;
  uint lda, ldb, ldc;
  uint stride_a, stride_b, stride_c;
  float alpha;
  uint accumulate;
  uint terms;
  uint offset_a, offset_b, offset_c;
  uint heads;
  uint head_stride_a, head_stride_b, head_stride_c;
};

// linear_bias_backward: dbias[o] += sum over n of dy[n][o]. (The forward bias is added by
// matmul as it stores y.)
struct LinearBiasPush {
  uint rows;      // N
  uint features;  // OUT
};

#ifdef __cplusplus
}  // namespace brigade::shaders
#endif
#endif
