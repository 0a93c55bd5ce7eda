// The residual add, and Flatten.
//
// Flatten has no kernel: (B, C, H, W) -> (B, C*H*W) is the same contiguous memory read with
// another shape, so its forward hands the activation view on and its backward hands the
// gradient view back unchanged.
#pragma once

#include <cstdint>

#include "ops/precision.h"
#include "vk/commands.h"

namespace brigade::ops {

// y = a + b.  a, b, y: (n). a (f.x) and y (f.y) may be kept in 16 bits, read and written by
// the kernel itself where n % 4 == 0 and the views are 16-byte aligned; b is fp32.
void residual_forward(vk::Commands& cmd, vk::View a, vk::View b, vk::View y, uint32_t n, Formats f = {});
// Its backward hands dy to both branches: a layer adds it where it computes a branch's
// gradient (LayerNorm's backward takes it as the residual, ops/layernorm.h).

}  // namespace brigade::ops
