// Conv2d (PyTorch's nn.Conv2d with dilation 1, groups 1, zero padding) as matrix products:
//   x (N, IC, H, W)  weight (OC, IC, KH, KW)  bias (OC)  y (N, OC, OH, OW)
// Each sample's input patches are copied into columns (IC*KH*KW, OH*OW) (im2col,
// shaders/conv2d_im2col.comp), so that with K = IC*KH*KW and P = OH*OW pixels:
//   forward          y[n] (OC, P)  = weight (OC, K) . columns[n] (K, P) + bias per row
//   backward-data    dcolumns[n]   = weight^T (K, OC) . dy[n] (OC, P), then gathered back
//                                    into dx (col2im, shaders/conv2d_col2im.comp)
//   backward-weight  dweight      += sum over n of dy[n] (OC, P) . columns[n]^T (P, K)
// all through ops::matmul, the same kernel as Linear's. `scratch` is memory the caller
// provides (conv2d_scratch_floats): the samples are worked through in chunks of as many as
// it holds columns for (at least one), so its size trades memory for fewer dispatches.
// A small weight gradient (too few output tiles to keep a device's threads busy) is summed
// in groups of samples side by side, then the groups added in order: still deterministic.
// Where the matrix kernel is slow, direct kernels (ops/conv2d_direct.h) compute the same
// passes without the scratch: form_for says which a device runs.
// Backward passes accumulate: dx +=, dweight +=, dbias +=, so micro-batches sum for free.
#pragma once

#include <cstdint>
#include <optional>

#include "shaders/conv.h"
#include "ops/form.h"
#include "ops/precision.h"
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


// Floats of scratch one sample takes in the form the matrix-form devices run: its columns,
// (IC*KH*KW) x (OH*OW), or its Winograd tiles where that form pays (ops/conv2d_winograd.h).
uint64_t conv2d_scratch_per_sample(const Conv2dShape& s);
// Floats of scratch for the passes over `samples` samples at a time: their columns, and room
// for the grouped weight gradient where the weight is small; with x `stored` in 16 bits, room
// for the products' 16-bit operands too (the matrix form's, on a device that multiplies
// matrices of that type).
uint64_t conv2d_scratch_floats(const Conv2dShape& s, uint32_t samples, Precision stored = Precision::Fp32);

// Throws UserError when the shape is not a valid convolution (a zero size, a zero stride,
// or a kernel larger than the padded input).
void conv2d_validate(const Conv2dShape& s);

// y = conv(x, weight) + bias; without a bias, y = conv(x, weight).
// x and y may be kept in 16 bits (`f`), in the matrix form only (conv2d_stores_half): the
// kernels read and write them as stored, and dx holds fp32 values rounded to x's precision.
// With a 16-bit x on a device that multiplies matrices of its type, the matrix form's products
// read 16-bit operands and take the matrix units (ops::matmul): the columns stored in 16 bits
// (the same values), the weight and, in the backward, dy packed, rounded (autocast's rule).
void conv2d_forward(vk::Commands& cmd, vk::View x, vk::View weight, std::optional<vk::View> bias,
                    vk::View y, const Conv2dShape& s, vk::View scratch,
                    std::optional<Form> method = {}, Formats f = {});

// dx += gradient of the loss with respect to x, given dy = dloss/dy.
void conv2d_backward_data(vk::Commands& cmd, vk::View dy, vk::View weight, vk::View dx,
                          const Conv2dShape& s, vk::View scratch,
                          std::optional<Form> method = {}, Formats f = {});

// dweight += dloss/dweight and, when given, dbias += dloss/dbias. Reductions over
// N * OH * OW run in a fixed order: the same inputs give bit-identical gradients.
void conv2d_backward_weight(vk::Commands& cmd, vk::View dy, vk::View x, vk::View dweight,
                            std::optional<vk::View> dbias, const Conv2dShape& s,
                            vk::View scratch, std::optional<Form> method = {}, Formats f = {});

// dbias += the sum of dy over samples and pixels, per channel. With `codes`, dy is the
// gradient of the ReLU and 2x2 pooling folded into the convolution (ops/conv2d_pool.h), its
// codes a word per `tile` x `tile` tile and channel: each pooled gradient counts where its
// code names an element.
void conv2d_backward_bias(vk::Commands& cmd, vk::View dy, vk::View dbias, const Conv2dShape& s,
                          std::optional<vk::View> codes = {}, uint32_t tile = 0);

// Either or both: conv2d_backward_weight when dweight is given (dbias with it), then
// conv2d_backward_data when dx is. In Winograd's form one pass computes what the two share
// (ops/conv2d_winograd.h).
void conv2d_backward(vk::Commands& cmd, vk::View dy, vk::View x, vk::View weight, std::optional<vk::View> dx,
                     std::optional<vk::View> dweight, std::optional<vk::View> dbias, const Conv2dShape& s,
                     vk::View scratch, std::optional<Form> method = {}, Formats f = {});

// The form `device` runs the convolution in on an x stored as `x`: the matrix form takes
// Winograd's where it pays (winograd::pays), else the device's (form_for). Not where the
// matrix form's products take the device's matrix units on a 16-bit x (conv2d_matrix_units):
// Winograd's would read its transformed operands rounded to 16 bits, which F(4x4, 3x3)
// amplifies (tools/torch/winograd_rounding.py: on fashion-cnn's second convolution, in bf16,
// an RMS error 12 times the matrix form's, the largest 29 times), and its products stay fp32
// ones on the SIMT cores.
Form conv2d_form(const vk::PhysicalInfo& device, const Conv2dShape& s, Precision x = Precision::Fp32);

// Whether the matrix form's products take the device's matrix units: on an x stored in 16
// bits of a type the device multiplies (default_matrix_tiling), where im2col stores the
// columns a quad at a time (OH*OW % 4 == 0).
bool conv2d_matrix_units(const vk::PhysicalInfo& device, const Conv2dShape& s, Precision x);

// Whether `device`'s form of the convolution stores a 16-bit output: the matrix form, with
// an even number of output pixels (matmul_stores_half); where Winograd's form pays, an even
// width, which either form it takes (conv2d_form, by x's format) stores.
bool conv2d_stores_half(const vk::PhysicalInfo& device, const Conv2dShape& s);

}  // namespace brigade::ops
