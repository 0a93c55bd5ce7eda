// matmul, the kernel under Linear, Conv2d and attention, in fp32 arithmetic on operands stored
// in fp32 or 16 bits (MatmulParams' formats):
//   C[z] = alpha * sum_r op(A[z,r]) op(B[z,r]) + bias   or, accumulating,   C[z] += ...
// for each batch index z and r < terms (usually 1), with op(A) (M,K), op(B) (K,N), C (M,N),
// all row-major, and an optional bias added as C is stored: (N) to every row or (M) to every
// column.
// The kernel is shaders/matmul.comp; its tiling is picked per device (matmul_tiling).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ops/precision.h"
#include "vk/commands.h"
#include "vk/physical.h"

namespace brigade::ops {

// The specialization constants that shape matmul.comp on a device.
// Matrix: the matrix-unit kernel (shaders/matmul_tiles.comp, ops/matmul_tiles.h) on 16-bit A
// and B, where wg_x and wg_y count warps along N and M, tm and tn matrices of lm x ln per
// warp along M and N, bk the staged K depth and subgroup the lanes of a warp.
struct MatmulTiling {
  enum class Variant : uint32_t { Registers = 0, Shared = 1, Matrix = 2 };
  Variant variant = Variant::Registers;
  uint32_t wg_x = 8, wg_y = 8;  // invocations per workgroup along N and along M
  uint32_t tm = 8, tn = 8;      // outputs per invocation along M and along N
  uint32_t bk = 16;             // Shared: K depth of the tiles staged in shared memory
  // Registers: lanes of a subgroup of this size share A's loads through subgroup broadcasts
  // (0: every invocation loads its own). Needs wg_x % subgroup == 0, tm % 4 == 0 and full
  // subgroups (a device whose subgroups are another size falls back to plain loads; one that
  // runs several sizes must let the pipeline require it: sharing_subgroup_size).
  uint32_t subgroup = 0;
  // Matrix: the shape of one product (lm x lk times lk x ln), and whether the tile
  // operations run on plain invocations instead of the device's matrix units.
  uint32_t lm = 0, ln = 0, lk = 0;
  bool emulated = false;
  // Matrix: how the warps' fragments are fed (BRIGADE_TILES_SPEC_FEED), two of them
  // measurements for `bench kernels`: Staged, tiles through shared memory (the product);
  // StageOnce, the first K tile multiplied in place of every tile (C wrong: the time of the
  // inner loop alone); Direct, fragments loaded straight from A and B as stored, no shared
  // tiles and no barriers (whole blocks of 16-byte aligned rows only; C right).
  enum class Feed : uint32_t { Staged = 0, StageOnce = 1, Direct = 2 };
  Feed feed = Feed::Staged;
  // Matrix: copies of the staged tiles in shared memory (BRIGADE_TILES_SPEC_STAGES), 1 or 2.
  uint32_t stages = 1;
  // Matrix with two copies: K tiles in flight in registers while a tile multiplies
  // (BRIGADE_TILES_SPEC_AHEAD), 1 or 2.
  uint32_t ahead = 1;
  // Shared and Matrix: C's blocks taken in groups of this many rows of blocks, down each
  // group's rows a column at a time (BRIGADE_MATMUL_SPEC_GROUP); 0 or 1: row after row.
  uint32_t group = 0;
  // Shared and Matrix: parts K is split into, each part's sum a workgroup's, added after
  // (ops/matmul_split.h); 1: none.
  uint32_t k_parts = 1;
  // e.g. "registers 8x8 per invocation, 8x8 invocations, A shared by subgroups of 8"
  std::string name() const;
  // Workgroup shared memory the kernel declares with this tiling.
  uint32_t shared_bytes() const;
  // Whether an invocation can write a 16-bit C's neighbouring outputs as one word (an even
  // number of columns per invocation).
  bool stores_pairs() const;
};

// Register blocking on CPU devices (lavapipe runs barriers by switching invocations, so
// shared-memory tiles are slow there); shared-memory tiles on GPUs.
// With `rows` and `cols` (the M and N of a problem), a CPU device's workgroups get the rows of
// invocations and columns per invocation that waste the fewest rows past M and columns past N:
// there every one of them is computed and thrown away.
MatmulTiling matmul_tiling(const vk::PhysicalInfo& device, uint32_t rows = 0, uint32_t cols = 0);

// The subgroup size the pipeline of register tiling `t` requires, in full subgroups: its
// `subgroup` where it shares A and the device can require that size; 0 where it needs none (no
// sharing, or a device of one subgroup size, whose gl_SubgroupSize the kernel checks). Empty
// where the device cannot run it: several sizes and none can be required. A driver may report
// gl_SubgroupSize 32 while running 8 or 16 wide (Intel's, without a required size).
std::optional<uint32_t> sharing_subgroup_size(const vk::PhysicalInfo& device, const MatmulTiling& t);

struct MatmulParams {
  uint32_t M = 0, N = 0, K = 0;
  bool trans_a = false;     // A is stored (K,M)
  bool trans_b = false;     // B is stored (N,K)
  bool accumulate = false;  // C += ... instead of C = ...
  float alpha = 1.0f;
  uint32_t batch = 1;
  // Products summed into each C[z]: A and B matrix z*terms + r for r < terms. The sum runs
  // in order, so it is as deterministic as one product with a longer K.
  uint32_t terms = 1;
  bool bias_rows = false;   // the bias is (M), one value per row of C, not (N)
  // Leading dimensions (elements between stored rows); 0 means packed.
  uint32_t lda = 0, ldb = 0, ldc = 0;
  // Elements between consecutive A, B (over z*terms + r) or C (over z) matrices; 0 repeats
  // one A or B for every index.
  uint32_t stride_a = 0, stride_b = 0, stride_c = 0;
  // A grid of matrices instead: matrix i of an operand starts (i / heads) * stride +
  // (i % heads) * head_stride elements in (attention's heads side by side in each sample's
  // token rows: stride between samples, head_stride between heads). The products and the
  // batch are whole multiples of heads.
  uint32_t heads = 1;
  uint32_t head_stride_a = 0, head_stride_b = 0, head_stride_c = 0;
  // Elements from the start of each view to its first matrix.
  uint32_t offset_a = 0, offset_b = 0, offset_c = 0;
  // Applied to each element as C is stored (shaders/matmul.h), with the other tensor laid out
  // as C: Gelu also writes gelu(C) into that tensor; GeluGrad multiplies the product by
  // gelu'(pre) before it is stored (so a Linear's backward-data through a GELU is one pass).
  // Relu stores relu(C) (NaN passing) and takes no tensor (a Linear with its ReLU folded in).
  enum class Epilogue : uint32_t { None = 0, Gelu = 1, GeluGrad = 2, Relu = 3 };
  Epilogue epilogue = Epilogue::None;
  // Causal attention's products may leave out work (shaders/matmul.h): SkipAbove (M = N)
  // leaves C's blocks wholly above the diagonal unspecified; KToRow and KFromRow (M = K) take
  // op(A) as zero right of, or left of, its diagonal. Each kernel leaves out what its blocks
  // of rows do not need: chunks of 4 of K an invocation (register blocks), whole K tiles a
  // workgroup (shared and matrix tiles; the matrix units' direct feed, a measurement, takes all).
  enum class Causal : uint32_t { None = 0, SkipAbove = 1, KToRow = 2, KFromRow = 3 };
  Causal causal = Causal::None;
  // How A, B and C are stored: fp32, or 16 bits packed two to a word (ops/precision.h), read
  // and written by the kernel itself. A 16-bit C needs matmul_stores_half. c_round: C is
  // stored in fp32 holding values rounded to that precision (a gradient kept at its
  // tensor's precision).
  Precision a_format = Precision::Fp32, b_format = Precision::Fp32, c_format = Precision::Fp32;
  Precision c_round = Precision::Fp32;
  // How the epilogue's tensor is stored: pre (GeluGrad) in any format; act (Gelu) as C is,
  // holding gelu of C as stored.
  Precision e_format = Precision::Fp32;
  // A 16-bit copy of an fp32 C, written as C is stored (`copy`, laid out as C in this format,
  // each value rounded to it): a gradient packed for the products that read it by the pass
  // that computes it, rather than by a pass of its own (ops::pack_into's bits). Fp32: none.
  // Not with a GELU epilogue; needs what a 16-bit C needs, but for accumulation.
  Precision copy_format = Precision::Fp32;
  // Unset: the matrix units where A and B are 16-bit values of a type the device multiplies
  // (default_matrix_tiling), otherwise matmul_tiling(the device), with K split where the
  // product has few blocks and a long K (ops/matmul_split.h).
  std::optional<MatmulTiling> tiling;
  // Set by the K split for the dispatch of its parts (shaders/matmul.h, K_CHUNK), not by callers.
  uint32_t k_chunk = 0;

  uint32_t ld_a() const { return lda ? lda : trans_a ? M : K; }
  uint32_t ld_b() const { return ldb ? ldb : trans_b ? K : N; }
  uint32_t ld_c() const { return ldc ? ldc : N; }
};

// The tiling ops::matmul takes for `p` where the caller fixed none: the matrix units where A
// and B are 16-bit values of a type the device multiplies (default_matrix_tiling, by M and N;
// the small blocks with GELU's gradient in the epilogue), otherwise matmul_tiling(the device),
// with K split (ops/matmul_split.h) within `workspace_bytes` where the product adds nothing
// else to C (`extras`: a bias, an epilogue's tensor or C's copy).
MatmulTiling default_tiling(const vk::PhysicalInfo& device, const MatmulParams& p, bool extras, uint64_t workspace_bytes);

// A product's shape as `bench profile` and `bench products` name it: M x N x K of op(A) op(B),
// A^T or B^T where stored transposed, xP for P products in one dispatch, a split K's parts, and
// whether it is causal ("16384x2304x768 B^T", "128x128x64 B^T x96 causal").
std::string product_name(const MatmulParams& p);
// Its floating-point operations: 2 M N K for each of the products it names (a causal one counted
// whole).
double product_flops(const MatmulParams& p);

// Whether the device's default tiling stores a 16-bit C of N columns (packed rows, no
// accumulation): where N is even, each invocation writes a row's outputs
// in even pairs (register blocks, whole quads where N % 4 == 0; shared tiles lay out an
// invocation's columns in neighbouring pairs).
bool matmul_stores_half(const vk::PhysicalInfo& device, uint32_t N);

// Records C (+)= alpha * op(A) op(B) (+ bias), then the epilogue. A, B and C are stored as
// their formats say, the epilogue's tensor (`epilogue`: pre for GeluGrad, activation for
// Gelu) as e_format says, C's copy (`copy`) as copy_format says; the bias is fp32; C and its
// copy must not overlap the others.
void matmul(vk::Commands& cmd, vk::View a, vk::View b, vk::View c, const MatmulParams& p,
            std::optional<vk::View> bias = std::nullopt,
            std::optional<vk::View> epilogue = std::nullopt,
            std::optional<vk::View> copy = std::nullopt);

}  // namespace brigade::ops
