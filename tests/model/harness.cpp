// The layer harness of harness.h: guarded tensors and one layer's passes on the GPU.
#include "harness.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>

#include "check.h"
#include "vk/commands.h"

namespace brigade::test {
namespace {

constexpr size_t kGuardFloats = 64;  // 256 bytes: any device's storage-buffer offset alignment
constexpr uint32_t kSentinel = 0x7FC0BEEF;  // a quiet NaN

size_t padded(size_t floats) { return (floats + kGuardFloats - 1) / kGuardFloats * kGuardFloats; }

}  // namespace

Guarded::Guarded(vk::Device& dev, size_t floats, const std::string& name)
    : buffer_(dev, (2 * kGuardFloats + padded(std::max<size_t>(floats, 1))) * 4,
              vk::Category::Activations, name),
      floats_(floats),
      name_(name) {
  fill_sentinel();
}

void Guarded::fill_sentinel() {
  std::vector<uint32_t> words(buffer_.size() / 4, kSentinel);
  vk::upload(buffer_, words.data(), buffer_.size());
}

void Guarded::write(std::span<const float> values) {
  REQUIRE_MESSAGE(values.size() == floats_, name_, ": ", values.size(), " values for ", floats_);
  vk::upload(buffer_, values.data(), floats_ * 4, kGuardFloats * 4);
}

void Guarded::write(std::span<const int32_t> values) {
  REQUIRE_MESSAGE(values.size() == floats_, name_, ": ", values.size(), " values for ", floats_);
  vk::upload(buffer_, values.data(), floats_ * 4, kGuardFloats * 4);
}

vk::View Guarded::view() const { return vk::View(buffer_, kGuardFloats * 4, floats_ * 4); }

std::vector<float> Guarded::read() const {
  std::vector<float> out(floats_);
  vk::download(buffer_, out.data(), floats_ * 4, kGuardFloats * 4);
  return out;
}

bool Guarded::guards_intact() const {
  std::vector<uint32_t> words(buffer_.size() / 4);
  vk::download(buffer_, words.data(), buffer_.size());
  auto intact = [&](size_t from, size_t to) {
    return std::all_of(words.begin() + from, words.begin() + to,
                       [](uint32_t w) { return w == kSentinel; });
  };
  return intact(0, kGuardFloats) && intact(kGuardFloats + floats_, words.size());
}

LayerData random_data(const model::Layer& layer, uint32_t rows, uint32_t seed, uint32_t vocab) {
  LayerData d;
  const uint64_t in = rows * model::elements(layer.input_shape());
  const uint64_t out = rows * model::elements(layer.output_shape());
  if (layer.integer_input()) {
    for (float v : random_vector(in, seed, 0.0f, float(vocab)))
      d.tokens.push_back(std::min(int32_t(v), int32_t(vocab) - 1));
  } else {
    d.x = random_vector(in, seed);
    d.dx = random_vector(in, seed + 1);
  }
  uint32_t s = seed + 2;
  for (const model::ParamSpec& p : layer.params()) {
    d.params.push_back(random_vector(p.elements(), s++, -0.5f, 0.5f));
    d.grads.push_back(random_vector(p.elements(), s++));
  }
  d.dy = random_vector(out, s);
  return d;
}

LayerRun::LayerRun(vk::Device& dev, const model::Layer& layer, uint32_t rows, const LayerData& data)
    : dev_(dev),
      layer_(layer),
      rows_(rows),
      x_(dev, rows * model::elements(layer.input_shape()), "x"),
      y_(dev, rows * model::elements(layer.output_shape()), "y"),
      dy_(dev, rows * model::elements(layer.output_shape()), "dy") {
  if (layer.integer_input()) x_.write(data.tokens);
  else x_.write(data.x);
  dy_.write(data.dy);
  if (!data.dx.empty()) {
    dx_.emplace(dev, data.dx.size(), "dx");
    dx_->write(data.dx);
  }
  for (const model::SavedSpec& s : layer.saved()) saved_.emplace_back(dev, s.floats(rows), s.name);
  const auto params = layer.params();
  REQUIRE(data.params.size() == params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    params_.emplace_back(dev, params[i].elements(), params[i].name);
    params_.back().write(data.params[i]);
    grads_.emplace_back(dev, params[i].elements(), "grad " + params[i].name);
    grads_.back().write(data.grads[i]);
  }
  for (const model::SavedSpec& s : layer.deferred())
    deferred_.emplace_back(dev, s.floats(rows), "deferred " + s.name);
  const uint64_t scratch = layer.scratch_floats(rows, ops::Precision::Fp32);
  if (scratch) scratch_.emplace(dev, scratch, "scratch");
  for (const Guarded& g : saved_) saved_views_.push_back(g.view());
  for (const Guarded& g : params_) param_views_.push_back(g.view());
  for (const Guarded& g : grads_) grad_views_.push_back(g.view());
  for (const Guarded& g : deferred_) deferred_views_.push_back(g.view());
}

void LayerRun::set_input(std::span<const float> x) { x_.write(x); }

model::Tensors LayerRun::tensors() const {
  model::Tensors t{x_.view(), y_.view(), saved_views_, param_views_, grad_views_, std::nullopt,
                   deferred_views_};
  if (scratch_) t.scratch = scratch_->view();
  return t;
}

model::Pass LayerRun::pass(vk::Commands& cmd) const {
  return model::Pass{cmd, rows_, rows_};
}

void LayerRun::forward(bool training, bool recompute) {
  if (scratch_) scratch_->fill_sentinel();
  vk::Commands cmd(dev_, "forward");
  model::Pass p = pass(cmd);
  p.training = training;
  p.recompute = recompute;
  layer_.forward(p, tensors());
  dispatches_ = cmd.dispatches();
  cmd.run();
}

void LayerRun::backward(bool split) {
  if (scratch_) scratch_->fill_sentinel();
  vk::Commands cmd(dev_, "backward");
  model::Pass p = pass(cmd);
  p.split = split;
  layer_.backward(p, tensors(), dy_.view(),
                  dx_ ? std::optional<vk::View>(dx_->view()) : std::nullopt);
  dispatches_ = cmd.dispatches();
  cmd.run();
}

// The scratch is refilled: backward_params must not rely on what backward left there.
void LayerRun::backward_params() {
  if (scratch_) scratch_->fill_sentinel();
  vk::Commands cmd(dev_, "backward_params");
  layer_.backward_params(pass(cmd), tensors());
  dispatches_ = cmd.dispatches();
  cmd.run();
}

void LayerRun::end_minibatch() {
  vk::Commands cmd(dev_, "end of mini-batch");
  layer_.end_minibatch(cmd, param_views_);
  cmd.run();
}

void LayerRun::check_guards() const {
  auto check = [](const Guarded& g) { CHECK_MESSAGE(g.guards_intact(), g.name(), ": guard band written"); };
  for (const Guarded* g : {&x_, &y_, &dy_}) check(*g);
  if (dx_) check(*dx_);
  if (scratch_) check(*scratch_);
  for (const auto* list : {&saved_, &params_, &grads_, &deferred_})
    for (const Guarded& g : *list) check(g);
}

void check_split_backward(vk::Device& dev, const model::Layer& layer, uint32_t rows,
                          const LayerData& data) {
  REQUIRE_FALSE(layer.deferred().empty());
  LayerRun whole(dev, layer, rows, data), split(dev, layer, rows, data);
  whole.forward();
  whole.backward();
  split.forward();
  split.backward(true);

  const auto params = layer.params();
  for (size_t i = 0; i < params.size(); ++i)
    CHECK_MESSAGE(split.grad(i) == data.grads[i], params[i].name,
                  ": the split backward changed its gradient");
  if (!data.dx.empty()) check_close(split.dx(), whole.dx(), 0, 0, "dx of the split backward");
  split.backward_params();
  if (!data.dx.empty()) check_close(split.dx(), whole.dx(), 0, 0, "dx after backward_params");
  for (size_t i = 0; i < params.size(); ++i)
    check_close(split.grad(i), whole.grad(i), 0, 0, "split d" + params[i].name);
  whole.check_guards();
  split.check_guards();
}

}  // namespace brigade::test
