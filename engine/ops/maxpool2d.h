// MaxPool2d (PyTorch's nn.MaxPool2d(k, s) with padding 0, dilation 1, floor mode): launchers
// that record the kernels of shaders/maxpool2d_*.comp into a vk::Commands.
//   x (N, C, H, W)  y (N, C, OH, OW)  with OH = (H - k) / s + 1, OW likewise
// Forward saves nothing; backward recomputes each window's argmax from x, with PyTorch's
// rule for ties (the first maximum in row-major order) and NaN (a NaN is the maximum).
// With `relu`, a ReLU before the pooling is folded in: one pass over x instead of two, and
// no tensor between them; the values and gradients are the two layers' bit for bit.
#pragma once

#include <cstdint>

#include "ops/precision.h"
#include "shaders/conv.h"
#include "vk/commands.h"

namespace brigade::ops {

struct MaxPool2dShape {
  uint32_t n = 1, c = 1, h = 1, w = 1;  // input (N, C, H, W)
  uint32_t k = 2, s = 2;                // k x k window, stride s
  // The window's values pass through ReLU first: y = max(relu(x)), and the gradient reaches
  // the argmax only where its relu(x) > 0, as a ReLU layer before the pooling would give.
  bool relu = false;

  uint32_t out_h() const { return (h - k) / s + 1; }
  uint32_t out_w() const { return (w - k) / s + 1; }
  uint64_t x_size() const { return uint64_t(n) * c * h * w; }
  uint64_t y_size() const { return uint64_t(n) * c * out_h() * out_w(); }
};

// Throws UserError when the shape is not a valid pooling (a zero size or stride, or a
// window larger than the input).
void maxpool2d_validate(const MaxPool2dShape& s);

// x and y may be kept in 16 bits (`f`), read and written by the kernels themselves; dx then
// holds fp32 values rounded to x's precision.
void maxpool2d_forward(vk::Commands& cmd, vk::View x, vk::View y, const MaxPool2dShape& s, Formats f = {});

// dx = dloss/dx: each dy goes to its window's argmax (summed where windows overlap), and
// every element no window picks is 0. dx is written whole, so it need not be cleared.
void maxpool2d_backward_data(vk::Commands& cmd, vk::View x, vk::View dy, vk::View dx,
                             const MaxPool2dShape& s, Formats f = {});

}  // namespace brigade::ops
