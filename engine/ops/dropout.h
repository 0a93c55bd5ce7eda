// Dropout in training mode with inverted scaling: y = x * mask / (1 - p). The mask is never
// stored: each element's keep bit is drawn from Philox-4x32-10 keyed by (seed, step,
// micro-batch, layer, element index), so the backward pass and a re-materialized forward
// redraw exactly the forward's mask. Evaluation skips the layer (identity).
#pragma once

#include <cstdint>

#include "shaders/elementwise.h"
#include "vk/commands.h"

namespace brigade::ops {

// Everything a mask depends on besides the element index and p.
struct DropoutKey {
  uint64_t seed = 0;
  uint32_t step = 0;         // optimizer step: a fresh mask every mini-batch
  uint32_t micro_batch = 0;  // a fresh mask for every micro-batch of the step
  uint32_t layer = 0;        // the layer's index in the model: independent masks per layer
};

// The push constants of both passes; the CPU reference draws its mask from them too.
// Throws UserError unless 0 <= p < 1.
shaders::DropoutPush dropout_push(uint32_t n, float p, const DropoutKey& key);

// x, y: (n)
void dropout_forward(vk::Commands& cmd, vk::View x, vk::View y, uint32_t n, float p,
                     const DropoutKey& key);
// dx += dy * mask / (1 - p), the mask redrawn from `key`.  dy, dx: (n)
void dropout_backward(vk::Commands& cmd, vk::View dy, vk::View dx, uint32_t n, float p,
                      const DropoutKey& key);

}  // namespace brigade::ops
