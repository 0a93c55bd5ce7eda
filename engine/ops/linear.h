// Linear (PyTorch layout), built on ops::matmul:
//   x (N,IN)   weight (OUT,IN)   bias (OUT), optional   y (N,OUT)
// forward y = x weight^T + bias; the backward passes accumulate (+=) into their outputs, so
// summing over micro-batches costs nothing extra.
#pragma once

#include <cstdint>
#include <optional>

#include "ops/matmul.h"
#include "vk/commands.h"

namespace brigade::ops {

// y = x weight^T (+ bias)
void linear_forward(vk::Commands& cmd, vk::View x, vk::View weight, std::optional<vk::View> bias,
                    vk::View y, uint32_t n, uint32_t in, uint32_t out,
                    std::optional<MatmulTiling> tiling = std::nullopt);

// y = x weight^T + bias and, as y is stored, act = gelu(y): a Linear followed by a GELU in
// one pass over the output
void linear_gelu_forward(vk::Commands& cmd, vk::View x, vk::View weight, vk::View bias, vk::View y,
                         vk::View act, uint32_t n, uint32_t in, uint32_t out);

// y = relu(x weight^T + bias) as y is stored: a Linear followed by a ReLU in one pass.
void linear_relu_forward(vk::Commands& cmd, vk::View x, vk::View weight, std::optional<vk::View> bias,
                         vk::View y, uint32_t n, uint32_t in, uint32_t out);

// dx += dy weight
void linear_backward_data(vk::Commands& cmd, vk::View dy, vk::View weight, vk::View dx,
                          uint32_t n, uint32_t in, uint32_t out,
                          std::optional<MatmulTiling> tiling = std::nullopt);

// dweight += dy^T x; dbias += the sum of dy over rows (when given)
void linear_backward_weight(vk::Commands& cmd, vk::View dy, vk::View x, vk::View dweight,
                            std::optional<vk::View> dbias, uint32_t n, uint32_t in, uint32_t out,
                            std::optional<MatmulTiling> tiling = std::nullopt);

// dbias += the sum of dy (n, out) over its rows, `lanes` invocations down each column
// (shaders/column_sums.h; 0: the device's choice).
void linear_bias_backward(vk::Commands& cmd, vk::View dy, vk::View dbias, uint32_t n, uint32_t out,
                          uint32_t lanes = 0);

}  // namespace brigade::ops
