// A gradient as a layer's products read it, autocast's rule: in a stage that stores its
// tensors in 16 bits, the fp32 values rounded to that precision and packed, once, into a room
// of the layer's scratch, so that both products reading it (the input gradient's and the
// weight gradient's) take the matrix units where the device has them (ops::matmul). The other
// kernels (bias sums, LayerNorm's, the residuals) read the fp32 values as they are. In an fp32
// stage the products read the values themselves.
#pragma once

#include <cstdint>

#include "ops/precision.h"
#include "vk/commands.h"

namespace brigade::model {

struct Operand {
  vk::View view;
  ops::Precision format = ops::Precision::Fp32;
};

// `grad` (`elements` floats) as the products read it in a stage storing `h`: packed into the
// start of `room` (operand_floats(elements, h) floats at least) where h is 16-bit.
inline Operand operand(vk::Commands& cmd, vk::View grad, uint64_t elements, ops::Precision h, vk::View room) {
  if (!ops::is_half(h)) return {grad};
  return {ops::pack_into(cmd, grad, uint32_t(elements), h, room), h};
}

// Whether a layer that multiplies its input by a weight (a Linear, lm_head) packs its output
// gradient for its products: where it takes x and y in 16 bits. Not the model's first layer,
// which reads the data in fp32, nor one after an fp32 stage: their products would not take the
// matrix units anyway.
inline bool packs_gradient(ops::Precision x, ops::Precision y) { return ops::is_half(x) && ops::is_half(y); }

// Floats of the room operand() packs `elements` values into in a stage storing `h`.
inline uint64_t operand_floats(uint64_t elements, ops::Precision h) {
  return ops::is_half(h) ? ops::stored_bytes(elements, h) / 4 : 0;
}

// Sub-views of a scratch view start 256 bytes apart at least (Vulkan's largest
// minStorageBufferOffsetAlignment): floats rounded up to whole such steps.
constexpr uint64_t kAlignFloats = 64;
inline uint64_t aligned_floats(uint64_t floats) { return (floats + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

}  // namespace brigade::model
