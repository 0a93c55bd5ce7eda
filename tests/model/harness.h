// Runs one model::Layer on the GPU with every tensor allocated from the layer's own
// declarations (params(), saved(), scratch_floats(), the shapes), which proves those
// declarations are sufficient. Each tensor sits in its own buffer between guard bands of a
// NaN sentinel that must come through untouched; outputs, saved and deferred tensors and the
// scratch also start as that sentinel, so a pass that reads what it never wrote shows up as NaN.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/layer.h"
#include "vk/buffer.h"
#include "vk/device.h"

namespace brigade::test {

// A tensor of `floats` 4-byte words inside a buffer, between 256-byte guard bands.
class Guarded {
 public:
  Guarded(vk::Device& dev, size_t floats, const std::string& name);  // all sentinel
  void write(std::span<const float> values);
  void write(std::span<const int32_t> values);
  void fill_sentinel();
  vk::View view() const;
  std::vector<float> read() const;
  bool guards_intact() const;
  const std::string& name() const { return name_; }

 private:
  vk::Buffer buffer_;
  size_t floats_;
  std::string name_;
};

// Host values of a layer's inputs and initial gradient contents.
struct LayerData {
  std::vector<float> x;                       // float input
  std::vector<int32_t> tokens;                // integer input (integer_input() layers)
  std::vector<std::vector<float>> params;     // one per params() entry
  std::vector<std::vector<float>> grads;      // initial gradient contents (Trainable ones)
  std::vector<float> dy;                      // output gradient
  std::vector<float> dx;                      // initial input gradient; empty: no dx
};

// Random LayerData for `layer` at `rows` samples: inputs and gradients in [-1, 1), tokens in
// [0, vocab), parameters in [-0.5, 0.5), and nonzero initial gradients (so that a pass that
// overwrites rather than adds shows up).
LayerData random_data(const model::Layer& layer, uint32_t rows, uint32_t seed,
                      uint32_t vocab = 0);

class LayerRun {
 public:
  LayerRun(vk::Device& dev, const model::Layer& layer, uint32_t rows, const LayerData& data);

  void set_input(std::span<const float> x);
  void forward(bool training = true, bool recompute = false);
  // split: the first half of a split backward (dx and the deferred() tensors).
  void backward(bool split = false);
  void backward_params();
  void end_minibatch();

  std::vector<float> y() const { return y_.read(); }
  std::vector<float> dx() const { return dx_->read(); }
  std::vector<float> saved(size_t i) const { return saved_[i].read(); }
  std::vector<float> param(size_t i) const { return params_[i].read(); }
  std::vector<float> grad(size_t i) const { return grads_[i].read(); }
  std::vector<float> deferred(size_t i) const { return deferred_[i].read(); }
  uint32_t dispatches() const { return dispatches_; }
  // CHECKs every guard band of every tensor.
  void check_guards() const;

 private:
  model::Tensors tensors() const;
  model::Pass pass(vk::Commands& cmd) const;

  vk::Device& dev_;
  const model::Layer& layer_;
  uint32_t rows_;
  Guarded x_, y_, dy_;
  std::optional<Guarded> dx_, scratch_;
  std::vector<Guarded> saved_, params_, grads_, deferred_;
  std::vector<vk::View> saved_views_, param_views_, grad_views_, deferred_views_;
  uint32_t dispatches_ = 0;
};

// Runs `layer`'s forward and whole backward on one LayerRun, and its forward, split backward
// and backward_params on another, from the same data. CHECKs that the split backward leaves
// every gradient at its initial contents, that dx and then every gradient come out
// bit-identical to the whole backward's (the same deterministic kernels on the same values),
// and the guard bands of both runs.
void check_split_backward(vk::Device& dev, const model::Layer& layer, uint32_t rows,
                          const LayerData& data);

}  // namespace brigade::test
