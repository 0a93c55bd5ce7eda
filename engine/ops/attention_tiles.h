// Flash attention's forward on matrix units (shaders/attention_tiles_forward.comp): qkv and y
// in one 16-bit type, the scores and the output computed by blocks of keys with the tile
// operations of the matrix-unit kernels (cooperative matrices where the device multiplies
// matrices of that type, plain invocations elsewhere), the (T,T) scores never stored, no
// scratch. It computes what the matrix form computes on 16-bit operands (ops/attention.h):
// y from P rounded to the type, lse in fp32; the sums run in another order, and each P is
// rounded against the row's running maximum, not its final one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ops/precision.h"
#include "vk/commands.h"
#include "vk/physical.h"

namespace brigade::ops {

// How the kernel tiles the work: products of lm x lk times lk x ln matrices, warps of `lanes`
// invocations, `warps` warps of lm query rows a workgroup, keys in blocks of bc.
struct AttentionTiling {
  uint32_t lm = 16, ln = 16, lk = 16, lanes = 32, warps = 4, bc = 32;
  bool emulated = false;  // the tile operations on plain invocations
  // e.g. "matrix units 16x16x16, 4 warps of 32, keys in blocks of 32"
  std::string name() const;
  // Workgroup shared memory the kernel declares for heads of HS.
  uint32_t shared_bytes(uint32_t HS) const;
};

// The tiling for heads of HS on the device's matrix units for `element` (fp16 or bf16): the
// matrix shape the products take by default (ops::default_matrix_tiling), in the most warps
// of 4, 2 and 1 whose shared memory fits. Nothing where the products do not take matrix units,
// or HS is not a multiple of the shape's k and n.
std::optional<AttentionTiling> attention_tiling(const vk::PhysicalInfo& device, Precision element, uint32_t HS);

// The same kernel on plain invocations (tests, and `bench`).
AttentionTiling emulated_attention_tiling(uint32_t lm = 16, uint32_t ln = 16, uint32_t lk = 16, uint32_t lanes = 32,
                                          uint32_t warps = 4);

// qkv (B,T,3C) -> y (B,T,C), lse (B,NH,T), qkv and y stored in `format` (16-bit); y and lse
// are overwritten. Both views start on 16 bytes.
void attention_tiles_forward(vk::Commands& cmd, const AttentionTiling& t, vk::View qkv, vk::View y, vk::View lse,
                             uint32_t B, uint32_t T, uint32_t C, uint32_t NH, Precision format);

}  // namespace brigade::ops
