// BatchNorm2d and LayerNorm (engine/model/layers.h) on ops/batchnorm.h and ops/layernorm.h.
#include "model/layers.h"
#include "ops/batchnorm.h"
#include "ops/layernorm.h"
#include "shaders/norm.h"
#include "util/error.h"

namespace brigade::model {

ops::LayerNormGrad input_gradient(const Tensors& t, std::optional<vk::View> residual) {
  return {residual, t.dx_copy, t.dx_copy ? t.x_precision : ops::Precision::Fp32};
}
namespace {

// Normalization and affine FLOPs per element: the statistics, the normalization and the
// scale and shift.
constexpr double kNormFlops = 8;

}  // namespace

BatchNorm2d::BatchNorm2d(const Shape& input, uint32_t features, std::string prefix)
    : ShapedLayer(input, input), channels_(features), plane_(0), prefix_(std::move(prefix)) {
  if (input.size() != 3 || input[0] != features)
    throw UserError("batchnorm2d num_features " + std::to_string(features) +
                    " does not match the incoming shape " + to_string(input) +
                    " (expected [num_features, H, W])");
  plane_ = input[1] * input[2];
}

// In PyTorch's state_dict order, then the statistics accumulator.
std::vector<ParamSpec> BatchNorm2d::params() const {
  const int64_t C = channels_;
  const int64_t stats_floats = sizeof(shaders::BatchNormStats) / 4;
  return {{prefix_ + "weight", {C}, ParamKind::Trainable, Init::Ones},
          {prefix_ + "bias", {C}, ParamKind::Trainable, Init::Zeros},
          {prefix_ + "running_mean", {C}, ParamKind::Buffer, Init::Zeros},
          {prefix_ + "running_var", {C}, ParamKind::Buffer, Init::Ones},
          {prefix_ + "stats", {C, stats_floats}, ParamKind::State, Init::Zeros}};
}

std::vector<SavedSpec> BatchNorm2d::saved() const {
  return {{"mean", 0, channels_, true}, {"rstd", 0, channels_, true}};
}

Cost BatchNorm2d::cost() const { return standard_cost(*this, kNormFlops * double(elements(input_))); }

// The kernels store a 16-bit y two neighbours of a plane at a time.
bool BatchNorm2d::stores_half(const vk::PhysicalInfo&) const { return plane_ % 2 == 0; }

void BatchNorm2d::forward(const Pass& p, const Tensors& t) const {
  const ops::Formats f{t.x_precision, t.y_precision};
  if (p.training)
    ops::batchnorm_forward_train(p.cmd, t.x, t.params[0], t.params[1], t.y, t.saved[0],
                                 t.saved[1], t.params[4], p.rows, channels_, plane_,
                                 !p.recompute, 1e-5f, f);
  else
    ops::batchnorm_forward_eval(p.cmd, t.x, t.params[0], t.params[1], t.params[2], t.params[3],
                                t.y, p.rows, channels_, plane_, 1e-5f, f);
}

// The kernel writes all three gradients at once, so it needs dx: the builder never puts
// BatchNorm2d first. It writes dx whole.
void BatchNorm2d::backward(const Pass& p, const Tensors& t, vk::View dy,
                           std::optional<vk::View> dx) const {
  BRIGADE_EXPECT(dx.has_value(), "batchnorm2d backward needs an input gradient");
  ops::batchnorm_backward(p.cmd, dy, t.x, t.params[0], t.saved[0], t.saved[1], *dx, t.grads[0],
                          t.grads[1], p.rows, channels_, plane_, t.x_precision, t.x_precision);
}

void BatchNorm2d::end_minibatch(vk::Commands& cmd, std::span<const vk::View> params) const {
  ops::batchnorm_update_running(cmd, params[4], params[2], params[3], channels_);
}

LayerNorm::LayerNorm(const Shape& input, uint32_t features, std::string prefix)
    : ShapedLayer(input, input), channels_(features), rows_per_sample_(0), prefix_(std::move(prefix)) {
  if (input.empty() || input.back() != features)
    throw UserError("layernorm normalized_shape " + std::to_string(features) +
                    " does not match the incoming shape " + to_string(input) +
                    " (its last dimension must equal it)");
  rows_per_sample_ = uint32_t(elements(input) / features);
}

std::vector<ParamSpec> LayerNorm::params() const {
  const int64_t C = channels_;
  return {{prefix_ + "weight", {C}, ParamKind::Trainable, Init::Ones},
          {prefix_ + "bias", {C}, ParamKind::Trainable, Init::Zeros}};
}

std::vector<SavedSpec> LayerNorm::saved() const {
  return {{"mean", rows_per_sample_, 0, true}, {"rstd", rows_per_sample_, 0, true}};
}

Cost LayerNorm::cost() const { return standard_cost(*this, kNormFlops * double(elements(input_))); }

// The kernels take 16 bits a quad at a time.
bool LayerNorm::stores_half(const vk::PhysicalInfo&) const { return channels_ % 4 == 0; }

void LayerNorm::forward(const Pass& p, const Tensors& t) const {
  ops::layernorm_forward(p.cmd, t.x, t.params[0], t.params[1], t.y, t.saved[0], t.saved[1],
                         p.rows * rows_per_sample_, channels_, 1e-5f, {t.x_precision, t.y_precision});
}

std::vector<SavedSpec> LayerNorm::deferred() const {
  return {{"dy", uint64_t(rows_per_sample_) * channels_}};
}

void LayerNorm::backward(const Pass& p, const Tensors& t, vk::View dy,
                         std::optional<vk::View> dx) const {
  const uint32_t n = p.rows * rows_per_sample_;
  if (p.split)
    copy_floats(p.cmd, dy, t.deferred[0], uint64_t(n) * channels_);
  else
    ops::layernorm_backward_weight(p.cmd, dy, t.x, t.saved[0], t.saved[1], t.grads[0],
                                   t.grads[1], n, channels_, 0, t.x_precision);
  if (dx)
    ops::layernorm_backward_data(p.cmd, dy, t.x, t.params[0], t.saved[0], t.saved[1], *dx, n,
                                 channels_, t.x_precision, t.x_precision, input_gradient(t));
}

void LayerNorm::backward_params(const Pass& p, const Tensors& t) const {
  ops::layernorm_backward_weight(p.cmd, t.deferred[0], t.x, t.saved[0], t.saved[1], t.grads[0],
                                 t.grads[1], p.rows * rows_per_sample_, channels_, 0, t.x_precision);
}

}  // namespace brigade::model
