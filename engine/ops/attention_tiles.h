// Flash attention on matrix units (shaders/attention_tiles_*.comp): qkv and y in one 16-bit
// type, the products computed by blocks of rows with the tile operations of the matrix-unit
// kernels (cooperative matrices where the device multiplies matrices of that type, plain
// invocations elsewhere), the (T,T) scores never stored. It computes what the matrix form
// computes on 16-bit operands (ops/attention.h): the products read P, dS and dy rounded to the
// type, lse and the gradients are fp32; the sums run in another order, and the forward rounds
// each P against its row's running maximum, not its final one.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "ops/matmul.h"
#include "ops/precision.h"
#include "vk/commands.h"
#include "vk/physical.h"

namespace brigade::ops {

// The kernels: the forward, and the backward's two passes (the queries', then the keys' and
// values').
enum class TilesPass { Forward, Query, KeyValue };

// How the kernels tile the work: products of lm x lk times lk x ln matrices, warps of `lanes`
// invocations; each pass (indexed by TilesPass) up to warps[pass] warps of lm rows a workgroup
// (it takes the most of warps, warps / 2, ... whose shared memory fits the device), the other
// side in blocks of bc[pass] rows.
struct AttentionTiling {
  using PerPass = std::array<uint32_t, 3>;
  uint32_t lm = 16, ln = 16, lk = 16, lanes = 32;
  PerPass warps{4, 4, 4}, bc{32, 32, 32};
  bool emulated = false;  // the tile operations on plain invocations
  // Every pass up to `w` warps, in blocks of `rows`.
  void set_blocks(uint32_t w, uint32_t rows) { warps = {w, w, w}, bc = {rows, rows, rows}; }
  // e.g. "matrix units 16x16x16, up to 4 warps of 32, blocks of 32"; where the passes differ,
  // each pass's (forward/queries'/keys'): "up to 4/4/2 warps of 32, blocks of 32/64/32"
  std::string name() const;
  // Workgroup shared memory a pass's kernel declares in `warps` warps for heads of HS.
  uint32_t shared_bytes(uint32_t HS, TilesPass pass, uint32_t warps) const;
  // The warps a pass takes under `max_shared` bytes of shared memory (0: not even one fits).
  uint32_t warps_for(uint32_t HS, TilesPass pass, uint32_t max_shared) const;
};

// The tiling for heads of HS on the device's matrix units for `element` (fp16 or bf16): the
// matrix shape the products take by default (ops::default_matrix_tiling), up to 4 warps.
// Nothing where the products do not take matrix units, HS is not a multiple of the shape's k
// and n, or a pass's one warp would not fit the device's shared memory.
std::optional<AttentionTiling> attention_tiling(const vk::PhysicalInfo& device, Precision element, uint32_t HS);

// A per-pass value in words: "4", or where the passes differ "4/4/2" (forward/queries'/keys').
std::string per_pass(const AttentionTiling::PerPass& v);

// The tiling on matrix units of shape `m` (an ops::matrix_tiling), up to 4 warps, blocks of
// two matrices' width (BRIGADE_ATTENTION_BLOCKS asks for others: WARPS,ROWS for every pass, or
// three such separated by ';' for the forward, the queries' and the keys' passes; a UserError
// where they are not a whole number of matrices); and the head sizes it takes, multiples of
// heads_multiple().
AttentionTiling attention_tiling(const MatmulTiling& m);
uint32_t heads_multiple(const AttentionTiling& t);

// The same kernel on plain invocations (tests).
AttentionTiling emulated_attention_tiling(uint32_t lm = 16, uint32_t ln = 16, uint32_t lk = 16, uint32_t lanes = 32,
                                          uint32_t warps = 4);

// qkv (B,T,3C) -> y (B,T,C), lse (B,NH,T), qkv and y stored in `format` (16-bit); y and lse
// are overwritten. qkv starts on 16 bytes.
void attention_tiles_forward(vk::Commands& cmd, const AttentionTiling& t, vk::View qkv, vk::View y, vk::View lse,
                             uint32_t B, uint32_t T, uint32_t C, uint32_t NH, Precision format);

// The backward: dqkv (B,T,3C, fp32) = the gradient, given the forward's qkv, y (in `format`)
// and lse, and dy (B,T,C, fp32; the products read it rounded to `format`, the softmax's delta
// as it is). `delta` holds B*NH*T floats (the queries' pass writes them for the other). qkv and
// dy start on 16 bytes. With `copy`, the passes also write dqkv packed to `format` there, the
// bits ops::pack_into gives. With `only`, that pass alone, Query or KeyValue (`bench attention`
// times them apart; the keys' and values' pass reads the delta the queries' pass wrote).
void attention_tiles_backward(vk::Commands& cmd, const AttentionTiling& t, vk::View qkv, vk::View y, vk::View lse,
                              vk::View dy, vk::View dqkv, vk::View delta, uint32_t B, uint32_t T, uint32_t C,
                              uint32_t NH, Precision format, std::optional<vk::View> copy = std::nullopt,
                              std::optional<TilesPass> only = std::nullopt);

}  // namespace brigade::ops
