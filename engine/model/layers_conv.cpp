// Conv2d and MaxPool2d (engine/model/layers.h) on ops/conv2d.h and ops/maxpool2d.h.
#include <algorithm>
#include <cmath>

#include "model/layers.h"
#include "ops/conv2d.h"
#include "ops/conv2d_pool.h"
#include "ops/form.h"
#include "ops/maxpool2d.h"
#include "util/error.h"

namespace brigade::model {
namespace {

void expect_chw(const Shape& input, const std::string& what) {
  if (input.size() != 3)
    throw UserError(what + " needs a [C, H, W] input, got " + to_string(input));
}

ops::Conv2dShape conv_shape(const Shape& input, uint32_t out, uint32_t kernel, uint32_t stride,
                            uint32_t padding, uint32_t n = 1) {
  return {n, input[0], input[1], input[2], out, kernel, kernel, stride, stride, padding, padding};
}

Shape conv_output(const Shape& input, uint32_t in, uint32_t out, uint32_t kernel, uint32_t stride,
                  uint32_t padding, bool pool) {
  expect_chw(input, "conv2d");
  if (input[0] != in)
    throw UserError("conv2d in_channels " + std::to_string(in) +
                    " does not match the incoming shape " + to_string(input) +
                    " (its first dimension must equal in_channels)");
  if (input[1] + 2 * uint64_t(padding) < kernel || input[2] + 2 * uint64_t(padding) < kernel)
    throw UserError("conv2d: the kernel " + std::to_string(kernel) + " is larger than the input " + to_string(input) +
                    " padded by " + std::to_string(padding));
  const ops::Conv2dShape s = conv_shape(input, out, kernel, stride, padding);
  ops::conv2d_validate(s);
  if (pool) return {out, s.out_h() / 2, s.out_w() / 2};
  return {out, s.out_h(), s.out_w()};
}


ops::MaxPool2dShape pool_shape(const Shape& input, uint32_t kernel, uint32_t stride,
                               uint32_t n = 1, bool relu = false) {
  return {n, input[0], input[1], input[2], kernel, stride, relu};
}

Shape pool_output(const Shape& input, uint32_t kernel, uint32_t stride) {
  expect_chw(input, "maxpool2d");
  if (kernel > input[1] || kernel > input[2])
    throw UserError("maxpool2d: the window " + std::to_string(kernel) + " is larger than the input " + to_string(input));
  const ops::MaxPool2dShape s = pool_shape(input, kernel, stride);
  ops::maxpool2d_validate(s);
  return {input[0], s.out_h(), s.out_w()};
}

}  // namespace

Conv2d::Conv2d(const Shape& input, uint32_t in_channels, uint32_t out_channels, uint32_t kernel,
               uint32_t stride, uint32_t padding, bool bias, std::string prefix, bool pool)
    : ShapedLayer(input, conv_output(input, in_channels, out_channels, kernel, stride, padding, false)),
      in_(in_channels),
      out_(out_channels),
      kernel_(kernel),
      stride_(stride),
      padding_(padding),
      bias_(bias),
      prefix_(std::move(prefix)) {
  if (pool) fold_ = ops::conv2d_pool_fits(shape(1))         ? Fold::Patch
                    : ops::conv2d_pool_tiles_fit(shape(1)) ? Fold::Tiles
                                                           : Fold::None;
  if (pools()) output_ = conv_output(input, in_channels, out_channels, kernel, stride, padding, true);
}

std::vector<ParamSpec> Conv2d::params() const {
  const float bound = 1.0f / std::sqrt(float(double(in_) * kernel_ * kernel_));
  std::vector<ParamSpec> p{{prefix_ + "weight", {out_, in_, kernel_, kernel_}, ParamKind::Trainable,
                            Init::Uniform, bound, true}};
  if (bias_) p.push_back({prefix_ + "bias", {out_}, ParamKind::Trainable, Init::Uniform, bound});
  return p;
}

// The codes, words whatever the precision.
std::vector<SavedSpec> Conv2d::saved() const {
  if (!pools()) return {};
  return {{"codes", ops::conv2d_pool_code_words(shape(1)), 0, true}};
}

Cost Conv2d::cost() const {
  return standard_cost(*this, 2.0 * double(shape(1).y_size()) * in_ * kernel_ * kernel_);
}

ops::Conv2dShape Conv2d::shape(uint32_t rows) const {
  return conv_shape(input_, out_, kernel_, stride_, padding_, rows);
}

uint64_t Conv2d::scratch_floats(uint32_t rows, ops::Precision stored, bool) const {
  const uint64_t per = ops::conv2d_scratch_per_sample(shape(1));
  const uint32_t samples = uint32_t(std::clamp<uint64_t>(kScratchCap / 4 / per, 1, std::max(rows, 1u)));
  if (pools()) return ops::conv2d_pool_scratch_floats(shape(rows), samples, stored);
  return ops::conv2d_scratch_floats(shape(1), samples, stored);
}

uint64_t Conv2d::forward_scratch_floats(uint32_t rows, ops::Precision stored, bool lean) const {
  return fold_ == Fold::Patch ? 0 : scratch_floats(rows, stored, lean);
}

// The folds' backward runs the convolution's passes on an fp32 gradient, which read a 16-bit
// x in the matrix and Winograd forms, not the direct one; the patch fold's kernel stores a
// 16-bit y on every device, the tiles fold packs its pooled output.
bool Conv2d::stores_half(const vk::PhysicalInfo& device) const {
  if (fold_ != Fold::None) return ops::form_for(device) != ops::Form::Direct;
  return ops::conv2d_stores_half(device, shape(1));
}

void Conv2d::forward(const Pass& p, const Tensors& t) const {
  const std::optional<vk::View> bias = bias_ ? std::optional(t.params[1]) : std::nullopt;
  if (pools())
    return ops::conv2d_pool_forward(p.cmd, t.x, t.params[0], bias, t.y, t.saved[0], shape(p.rows), *t.scratch,
                                    {t.x_precision, t.y_precision});
  ops::conv2d_forward(p.cmd, t.x, t.params[0], bias, t.y, shape(p.rows), *t.scratch, std::nullopt,
                      {t.x_precision, t.y_precision});
}

std::vector<SavedSpec> Conv2d::deferred() const { return {{"dy", elements(output_)}}; }

void Conv2d::backward(const Pass& p, const Tensors& t, vk::View dy,
                      std::optional<vk::View> dx) const {
  if (p.split) copy_floats(p.cmd, dy, t.deferred[0], p.rows * elements(output_));
  const std::optional<vk::View> dweight = p.split ? std::nullopt : std::optional(t.grads[0]);
  const std::optional<vk::View> dbias = bias_ && !p.split ? std::optional(t.grads[1]) : std::nullopt;
  if (fold_ == Fold::Tiles)
    return ops::conv2d_pool_backward(p.cmd, dy, t.saved[0], t.x, t.params[0], dx, dweight, dbias, shape(p.rows),
                                     *t.scratch, formats(t));
  if (fold_ == Fold::None)  // both gradients at once where both are asked: Winograd's form shares a pass
    return ops::conv2d_backward(p.cmd, dy, t.x, t.params[0], dx, dweight, dbias, shape(p.rows), *t.scratch,
                                std::nullopt, formats(t));
  // The patch fold.
  if (dweight) backward_weight(p, t, dy);
  if (!dx) return;
  // After the weight gradient, which reads the scratch this may overwrite (recorded in order:
  // vk::Commands puts a barrier between).
  const vk::View g = ops::conv2d_pool_unpool(p.cmd, dy, t.saved[0], shape(p.rows), *t.scratch);
  ops::conv2d_backward_data(p.cmd, g, t.params[0], *dx, shape(p.rows),
                            ops::conv2d_pool_conv_scratch(shape(p.rows), *t.scratch), std::nullopt, formats(t));
}

void Conv2d::backward_params(const Pass& p, const Tensors& t) const { backward_weight(p, t, t.deferred[0]); }

void Conv2d::backward_weight(const Pass& p, const Tensors& t, vk::View dy) const {
  const std::optional<vk::View> dbias = bias_ ? std::optional(t.grads[1]) : std::nullopt;
  if (fold_ == Fold::Patch)
    return ops::conv2d_pool_backward_weight(p.cmd, dy, t.saved[0], t.x, t.grads[0], dbias, shape(p.rows), *t.scratch,
                                            t.x_precision);
  if (fold_ == Fold::Tiles)
    return ops::conv2d_pool_backward(p.cmd, dy, t.saved[0], t.x, t.params[0], std::nullopt, t.grads[0], dbias,
                                     shape(p.rows), *t.scratch, formats(t));
  ops::conv2d_backward_weight(p.cmd, dy, t.x, t.grads[0], dbias, shape(p.rows), *t.scratch, std::nullopt, formats(t));
}

// The convolution's formats: x as stored; its output fp32 under a pooling fold (the fold
// stores the pooled output), else as stored.
ops::Formats Conv2d::formats(const Tensors& t) const {
  return {t.x_precision, pools() ? ops::Precision::Fp32 : t.y_precision};
}

MaxPool2d::MaxPool2d(const Shape& input, uint32_t kernel, uint32_t stride, bool relu_first, bool folded)
    : ShapedLayer(input, folded ? input : pool_output(input, kernel, stride)), kernel_(kernel), stride_(stride),
      relu_first_(relu_first), folded_(folded) {}

// One comparison per window element.
Cost MaxPool2d::cost() const {
  return standard_cost(*this, double(elements(output_)) * kernel_ * kernel_);
}

// Every device: the kernels store a 16-bit y a word at a time.
bool MaxPool2d::stores_half(const vk::PhysicalInfo&) const { return true; }

void MaxPool2d::forward(const Pass& p, const Tensors& t) const {
  ops::maxpool2d_forward(p.cmd, t.x, t.y, pool_shape(input_, kernel_, stride_, p.rows, relu_first_),
                         {t.x_precision, t.y_precision});
}

void MaxPool2d::backward(const Pass& p, const Tensors& t, vk::View dy,
                         std::optional<vk::View> dx) const {
  if (dx)
    ops::maxpool2d_backward_data(p.cmd, t.x, dy, *dx, pool_shape(input_, kernel_, stride_, p.rows, relu_first_),
                                 {t.x_precision, t.y_precision});
}

}  // namespace brigade::model
