// Linear (PyTorch layout), built on ops::matmul:
//   x (N,IN)   weight (OUT,IN)   bias (OUT), optional   y (N,OUT)
// forward y = x weight^T + bias; the backward passes accumulate (+=) into their outputs, so
// summing over micro-batches costs nothing extra.
// x and y may be kept in 16 bits (Formats), read and written by the kernels themselves;
// then dx holds fp32 values rounded to x's precision. The forward passes and backward_data
// read the weight as Formats::w stores it (a 16-bit stage's copy); dweight is fp32.
#pragma once

#include <cstdint>
#include <optional>

#include "ops/column_sums.h"
#include "ops/matmul.h"
#include "vk/commands.h"

namespace brigade::ops {

// A 16-bit y needs matmul_stores_half(OUT).

// y = x weight^T (+ bias)
void linear_forward(vk::Commands& cmd, vk::View x, vk::View weight, std::optional<vk::View> bias,
                    vk::View y, uint32_t n, uint32_t in, uint32_t out,
                    std::optional<MatmulTiling> tiling = std::nullopt, Formats f = {});

// y = x weight^T + bias and, as y is stored, act = gelu(y as stored): a Linear followed by a
// GELU in one pass over the output; act is stored as y is (f.y).
void linear_gelu_forward(vk::Commands& cmd, vk::View x, vk::View weight, vk::View bias, vk::View y,
                         vk::View act, uint32_t n, uint32_t in, uint32_t out, Formats f = {});

// y = relu(x weight^T + bias) as y is stored: a Linear followed by a ReLU in one pass.
void linear_relu_forward(vk::Commands& cmd, vk::View x, vk::View weight, std::optional<vk::View> bias,
                         vk::View y, uint32_t n, uint32_t in, uint32_t out, Formats f = {});

// dx += dy weight; f.y: how dy is stored (a 16-bit stage's products read its gradients packed).
void linear_backward_data(vk::Commands& cmd, vk::View dy, vk::View weight, vk::View dx,
                          uint32_t n, uint32_t in, uint32_t out,
                          std::optional<MatmulTiling> tiling = std::nullopt, Formats f = {});

// dweight += dy^T x; dbias += the sum of dy over rows (when given). f.x: how x is stored; f.y:
// how dy is (16 bits only without dbias: the bias sums read fp32).
void linear_backward_weight(vk::Commands& cmd, vk::View dy, vk::View x, vk::View dweight,
                            std::optional<vk::View> dbias, uint32_t n, uint32_t in, uint32_t out,
                            std::optional<MatmulTiling> tiling = std::nullopt, Formats f = {});

// dbias += the sum of dy (n, out) over its rows, walked as `walk` says (ops/column_sums.h).
void linear_bias_backward(vk::Commands& cmd, vk::View dy, vk::View dbias, uint32_t n, uint32_t out,
                          ColumnWalk walk = {});

// The backward of a ReLU folded into a Linear, with the bias gradient in the same pass:
// g = dy where y > 0, else 0 (written whole), and dbias += the sum of g over rows, the same
// bits as relu_backward then linear_bias_backward. y: (n, out) as `y_format` stores it.
void linear_relu_backward(vk::Commands& cmd, vk::View y, vk::View dy, vk::View g, vk::View dbias, uint32_t n,
                          uint32_t out, Precision y_format, ColumnWalk walk = {});

}  // namespace brigade::ops
