// Flatten, Linear, ReLU and GELU (engine/model/layers.h) on the ops of engine/ops.
#include <cmath>

#include "model/layers.h"
#include "ops/activation.h"
#include "ops/linear.h"
#include "util/error.h"

namespace brigade::model {

Cost standard_cost(const Layer& layer, double flops) {
  Cost c;
  c.flops = flops;
  for (const ParamSpec& p : layer.params()) c.param_bytes += p.elements() * 4;
  uint64_t floats = layer.is_view() ? 0 : elements(layer.output_shape());
  for (const SavedSpec& s : layer.saved()) floats += s.per_sample;
  c.activation_bytes = floats * 4;
  return c;
}

void copy_floats(vk::Commands& cmd, vk::View src, vk::View dst, uint64_t floats) {
  BRIGADE_EXPECT_FLOATS(src, floats, "copy source");
  BRIGADE_EXPECT_FLOATS(dst, floats, "copy destination");
  cmd.copy(*src.buffer, *dst.buffer, floats * 4, src.offset, dst.offset);
}

Flatten::Flatten(const Shape& input) : ShapedLayer(input, {uint32_t(elements(input))}) {}

namespace {

Shape with_last(Shape s, uint32_t last) {
  s.back() = last;
  return s;
}

}  // namespace

Linear::Linear(const Shape& input, uint32_t in_features, uint32_t out_features, bool bias,
               std::string prefix, bool relu)
    : ShapedLayer(input, input.empty() ? input : with_last(input, out_features)),
      in_(in_features),
      out_(out_features),
      rows_per_sample_(0),
      bias_(bias),
      prefix_(std::move(prefix)),
      relu_(relu) {
  if (in_ == 0 || out_ == 0) throw UserError("linear features must be positive");
  if (input.empty() || input.back() != in_)
    throw UserError("linear in_features " + std::to_string(in_) +
                    " does not match the incoming shape " + to_string(input) +
                    " (its last dimension must equal in_features)");
  rows_per_sample_ = uint32_t(elements(input) / in_);
}

std::vector<ParamSpec> Linear::params() const {
  const float bound = 1.0f / std::sqrt(float(in_));
  std::vector<ParamSpec> p{{prefix_ + "weight", {out_, in_}, ParamKind::Trainable, Init::Uniform, bound, true}};
  if (bias_) p.push_back({prefix_ + "bias", {out_}, ParamKind::Trainable, Init::Uniform, bound});
  return p;
}

Cost Linear::cost() const { return standard_cost(*this, 2.0 * rows_per_sample_ * in_ * out_); }

// The masked output gradient of a folded ReLU, then in a 16-bit stage the gradient the products
// read, packed (operand.h): one pass's rows.
uint64_t Linear::scratch_floats(uint32_t rows, ops::Precision stored, bool) const {
  const uint64_t floats = uint64_t(rows) * rows_per_sample_ * out_;
  return (relu_ ? aligned_floats(floats) : 0) + operand_floats(floats, stored);
}

// g (one pass's rows) as the products read it: packed into the scratch, after a folded ReLU's
// mask, where the layer packs its gradient (operand.h).
Operand Linear::product_operand(const Pass& p, const Tensors& t, vk::View g) const {
  const uint64_t floats = uint64_t(p.rows) * rows_per_sample_ * out_;
  if (!packs_gradient(t.x_precision, t.y_precision)) return {g};
  const uint64_t at = relu_ ? aligned_floats(floats) : 0;
  return operand(p.cmd, g, floats, t.y_precision,
                 vk::View(*t.scratch->buffer, t.scratch->offset + at * 4, t.scratch->range - at * 4));
}

bool Linear::stores_half(const vk::PhysicalInfo& device) const { return ops::matmul_stores_half(device, out_); }

void Linear::forward(const Pass& p, const Tensors& t) const {
  const std::optional<vk::View> bias = bias_ ? std::optional(t.params[1]) : std::nullopt;
  const uint32_t n = p.rows * rows_per_sample_;
  const ops::Formats f{t.x_precision, t.y_precision, t.w_precision};
  if (relu_) ops::linear_relu_forward(p.cmd, t.x, t.params[0], bias, t.y, n, in_, out_, f);
  else ops::linear_forward(p.cmd, t.x, t.params[0], bias, t.y, n, in_, out_, std::nullopt, f);
}

std::vector<SavedSpec> Linear::deferred() const {
  return {{"dy", uint64_t(rows_per_sample_) * out_}};
}

void Linear::backward(const Pass& p, const Tensors& t, vk::View dy,
                      std::optional<vk::View> dx) const {
  const uint32_t n = p.rows * rows_per_sample_;
  const uint64_t floats = uint64_t(n) * out_;
  vk::View g = dy;  // the gradient at the product: dy, or dy through the folded ReLU
  // Without a split, the bias gradient comes with the ReLU's backward, in its pass over dy.
  const bool bias_with_relu = relu_ && bias_ && !p.split;
  if (relu_) {
    g = p.split ? t.deferred[0] : vk::View(*t.scratch->buffer, t.scratch->offset, floats * 4);
    if (bias_with_relu) ops::linear_relu_backward(p.cmd, t.y, dy, g, t.grads[1], n, out_, t.y_precision);
    else ops::relu_backward(p.cmd, t.y, dy, g, uint32_t(floats), t.y_precision);
  } else if (p.split) {
    copy_floats(p.cmd, dy, t.deferred[0], floats);
  }
  const Operand product = product_operand(p, t, g);
  if (!p.split) backward_weight(p, t, g, product, !bias_with_relu);
  if (dx)
    ops::linear_backward_data(p.cmd, product.view, t.params[0], *dx, n, in_, out_, std::nullopt,
                              {t.x_precision, product.format, t.w_precision});
}

void Linear::backward_params(const Pass& p, const Tensors& t) const {
  backward_weight(p, t, t.deferred[0], product_operand(p, t, t.deferred[0]), true);
}

void Linear::backward_weight(const Pass& p, const Tensors& t, vk::View g, const Operand& product,
                             bool with_bias) const {
  const uint32_t n = p.rows * rows_per_sample_;
  ops::linear_backward_weight(p.cmd, product.view, t.x, t.grads[0], std::nullopt, n, in_, out_, std::nullopt,
                              {t.x_precision, product.format});
  if (bias_ && with_bias) ops::linear_bias_backward(p.cmd, g, t.grads[1], n, out_);
}

Cost ReLU::cost() const { return standard_cost(*this, double(elements(output_))); }

void ReLU::forward(const Pass& p, const Tensors& t) const {
  if (!folded_) ops::relu_forward(p.cmd, t.x, t.y, uint32_t(p.rows * elements(input_)));
}

void ReLU::backward(const Pass& p, const Tensors& t, vk::View dy,
                    std::optional<vk::View> dx) const {
  if (dx && !folded_) ops::relu_backward(p.cmd, t.y, dy, *dx, uint32_t(p.rows * elements(input_)));
}

// About 8 FLOPs per element for the tanh approximation (multiplies, adds and the tanh).
Cost GELU::cost() const { return standard_cost(*this, 8.0 * double(elements(output_))); }

void GELU::forward(const Pass& p, const Tensors& t) const {
  ops::gelu_forward(p.cmd, t.x, t.y, uint32_t(p.rows * elements(input_)));
}

void GELU::backward(const Pass& p, const Tensors& t, vk::View dy,
                    std::optional<vk::View> dx) const {
  if (dx) ops::gelu_backward(p.cmd, t.x, dy, *dx, uint32_t(p.rows * elements(input_)));
}

}  // namespace brigade::model
