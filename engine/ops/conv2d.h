// Conv2d (PyTorch's nn.Conv2d with dilation 1, groups 1, zero padding): launchers that
// record the kernels of shaders/conv2d_*.comp into a vk::Commands.
//   x (N, IC, H, W)  weight (OC, IC, KH, KW)  bias (OC)  y (N, OC, OH, OW)
// Backward passes accumulate: dx +=, dweight +=, dbias +=, so micro-batches sum for free.
// Without `tiles`, a launcher uses Conv2dTiles::for_device of the recording device.
#pragma once

#include <cstdint>
#include <optional>

#include "shaders/conv.h"
#include "vk/commands.h"

namespace brigade::ops {

struct Conv2dShape {
  uint32_t n = 1, ic = 1, h = 1, w = 1;  // input (N, IC, H, W)
  uint32_t oc = 1, kh = 1, kw = 1;       // weight (OC, IC, KH, KW)
  uint32_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;

  uint32_t out_h() const { return (h + 2 * pad_h - kh) / stride_h + 1; }
  uint32_t out_w() const { return (w + 2 * pad_w - kw) / stride_w + 1; }
  uint64_t x_size() const { return uint64_t(n) * ic * h * w; }
  uint64_t weight_size() const { return uint64_t(oc) * ic * kh * kw; }
  uint64_t y_size() const { return uint64_t(n) * oc * out_h() * out_w(); }
};

// Register tiles of the kernels (see shaders/conv.h): outputs per invocation. Results do not
// depend on them, only speed. Each is shrunk to the extent it covers and evened out (14
// pixels with px = 16 run as one block of 14, with px = 8 as two of 7).
struct Conv2dTiles {
  uint32_t forward_oc = 4, forward_px = 4;
  uint32_t data_ic = 4, data_px = 4;
  uint32_t weight_oc = 4, weight_k = 4;

  // The tiles for a device: measured on lavapipe for CPU devices; a conventional 4 x 4 of
  // registers elsewhere.
  static Conv2dTiles for_device(const vk::PhysicalInfo& info);
};

// Throws UserError when the shape is not a valid convolution (a zero size, a zero stride,
// or a kernel larger than the padded input).
void conv2d_validate(const Conv2dShape& s);

// y = conv(x, weight) + bias; without a bias, y = conv(x, weight).
void conv2d_forward(vk::Commands& cmd, vk::View x, vk::View weight, std::optional<vk::View> bias,
                    vk::View y, const Conv2dShape& s, std::optional<Conv2dTiles> tiles = {});

// dx += gradient of the loss with respect to x, given dy = dloss/dy.
void conv2d_backward_data(vk::Commands& cmd, vk::View dy, vk::View weight, vk::View dx,
                          const Conv2dShape& s, std::optional<Conv2dTiles> tiles = {});

// dweight += dloss/dweight and, when given, dbias += dloss/dbias. Reductions over
// N * OH * OW run in a fixed order: the same inputs give bit-identical gradients.
void conv2d_backward_weight(vk::Commands& cmd, vk::View dy, vk::View x, vk::View dweight,
                            std::optional<vk::View> dbias, const Conv2dShape& s,
                            std::optional<Conv2dTiles> tiles = {});

}  // namespace brigade::ops
