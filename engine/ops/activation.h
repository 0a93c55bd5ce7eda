// Activations: ReLU and GELU (tanh approximation). Each records its dispatch into `cmd`;
// backward passes accumulate (+=) into dx.
#pragma once

#include <cstdint>

#include "ops/precision.h"
#include "vk/commands.h"

namespace brigade::ops {

// x, y: (n)
void relu_forward(vk::Commands& cmd, vk::View x, vk::View y, uint32_t n);
// dx = dy where y > 0, else 0 (dx written whole). Takes the forward's OUTPUT y (the tensor
// PyTorch saves), so the input need not be kept.  y: (n) stored as `y_format` says, dy, dx: (n)
void relu_backward(vk::Commands& cmd, vk::View y, vk::View dy, vk::View dx, uint32_t n,
                   Precision y_format = Precision::Fp32);

// PyTorch's GELU(approximate='tanh').  x, y: (n)
void gelu_forward(vk::Commands& cmd, vk::View x, vk::View y, uint32_t n);
// dx += dy * gelu'(x).  x, dy, dx: (n)
void gelu_backward(vk::Commands& cmd, vk::View x, vk::View dy, vk::View dx, uint32_t n);

}  // namespace brigade::ops
