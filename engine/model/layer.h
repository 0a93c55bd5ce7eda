// A model is a sequence of layers (GPipe's interface). Each layer knows its parameters (by
// their PyTorch state_dict names), what it keeps from forward to backward, its cost, and how
// to record its forward and backward passes for one micro-batch. It owns no buffers: the
// stage that runs it allocates every tensor it declares, so that memory can be planned
// (and checked against the plan) before anything runs, and re-materialization can decide
// which micro-batches keep what.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ops/precision.h"
#include "vk/commands.h"
#include "vk/physical.h"

namespace brigade::model {

// The shape of one sample's activation, batch dimension excluded: {1, 28, 28}, {784},
// {T, C}, or {T} for token ids.
using Shape = std::vector<uint32_t>;
uint64_t elements(const Shape& s);
std::string to_string(const Shape& s);  // "[1, 28, 28]"

// How a parameter starts (brigade init). Uniform draws from [-scale, scale), Normal from
// N(0, scale^2).
enum class Init { Zeros, Ones, Uniform, Normal };

// What kind of tensor a ParamSpec is.
//   Trainable: has a gradient, updated by the optimizer, saved under its name.
//   Buffer:    saved and loaded under its name, never optimized (BatchNorm running stats).
//   State:     internal, zero at start, neither saved nor optimized (BatchNorm's statistics
//              accumulator over the micro-batches of one mini-batch).
enum class ParamKind { Trainable, Buffer, State };

struct ParamSpec {
  std::string name;             // PyTorch state_dict name, e.g. "3.weight"
  std::vector<int64_t> shape;   // PyTorch layout
  ParamKind kind = ParamKind::Trainable;
  Init init = Init::Zeros;
  float scale = 0;
  // A matrix product's weight (Linear's, Conv2d's, a GPT block's projections, lm_head's): in
  // a 16-bit stage the layer's kernels read a copy of it rounded to the stage's precision, as
  // PyTorch's autocast casts a Linear's weight; the optimizer updates the fp32 master.
  bool product = false;
  uint64_t elements() const;
};

// A tensor that forward writes and backward reads, besides the layer's input and output:
// `per_sample` floats for every sample of the micro-batch plus `fixed` floats. A stage in a
// 16-bit precision keeps it in 16 bits unless it is `wide`: statistics (means, reciprocal
// deviations, log-sum-exps) stay fp32 whatever the precision.
struct SavedSpec {
  std::string name;
  uint64_t per_sample = 0;
  uint64_t fixed = 0;
  bool wide = false;
  uint64_t floats(uint32_t rows) const { return per_sample * rows + fixed; }
};

// Cost estimates the partitioner balances and the planner adds up.
struct Cost {
  double flops = 0;                // forward FLOPs per sample (backward is taken as 2x)
  uint64_t param_bytes = 0;        // every ParamSpec of the layer, in bytes
  uint64_t activation_bytes = 0;   // per sample: output + saved tensors kept for backward
};

// Where and how one pass of one micro-batch runs.
struct Pass {
  vk::Commands& cmd;
  uint32_t rows = 0;          // samples in this micro-batch
  uint32_t total_rows = 0;    // samples in the whole mini-batch
  uint32_t step = 0;          // optimizer step (random keys)
  uint32_t micro_batch = 0;   // index in the mini-batch (random keys)
  uint32_t layer = 0;         // the layer's index in the model (random keys)
  bool training = true;       // false: evaluation (BatchNorm uses running stats)
  bool recompute = false;     // re-materialization: this forward was already counted once
  // Backward only: record the input gradient now and the parameter gradients later, in
  // backward_params. Zero-bubble schedules split a backward so: the input gradient ("B") is
  // what the previous stage waits for; the parameter gradients ("W") fill the bubbles.
  bool split = false;
};

// The buffers of one layer for one micro-batch. Views are sized for `rows` samples.
struct Tensors {
  vk::View x;                         // input:  rows x elements(input shape)
  vk::View y;                         // output: rows x elements(output shape)
  std::span<const vk::View> saved;    // saved(), in order
  std::span<const vk::View> params;   // params(), in order (every kind)
  std::span<const vk::View> grads;    // one per params() entry; meaningful for Trainable only
  std::optional<vk::View> scratch;    // scratch_floats(rows) floats, when nonzero
  std::span<const vk::View> deferred; // deferred(), in order; only for a split backward
  // The Cell runs forward passes only (evaluation, generation): `scratch` holds
  // forward_scratch_floats(rows), which the forward lays out as its own.
  bool forward_only = false;
  // How x and y (and saved tensors) are stored, for a layer the Cell gives its stored
  // tensors (Layer::stores_half); fp32 for every other, which gets fp32 copies.
  ops::Precision x_precision = ops::Precision::Fp32, y_precision = ops::Precision::Fp32;
  // How the `product` params among `params` are stored: fp32 (the master, or a copy rounded to
  // a 16-bit precision), or 16 bits packed where the layer reads_half_weights.
  ops::Precision w_precision = ops::Precision::Fp32;
  // Backward, in a 16-bit stage: dy packed in y_precision by the layer after this one as it
  // wrote dy (where this one reads_output_gradient_copy and that one writes_input_gradient_copy),
  // and where this layer writes dx's copy in x_precision for the layer before it.
  std::optional<vk::View> dy_copy, dx_copy;
};

class Layer {
 public:
  virtual ~Layer() = default;
  // "linear", "conv2d", "gpt_block", ...
  virtual std::string kind() const = 0;
  virtual const Shape& input_shape() const = 0;
  virtual const Shape& output_shape() const = 0;
  virtual std::vector<ParamSpec> params() const { return {}; }
  virtual std::vector<SavedSpec> saved() const { return {}; }
  // What a split backward keeps from backward to backward_params (the output gradient, or a
  // block's internal gradients), per micro-batch. Empty: the layer does not split, and its
  // backward records the parameter gradients whether split or not.
  virtual std::vector<SavedSpec> deferred() const { return {}; }
  // Floats of transient memory either pass over `rows` samples may overwrite freely. A layer
  // may ask for less than it could use and work through the samples in chunks (Conv2d).
  // `stored`: how the Cell stores its tensors, Tensors::y_precision (fp32 for a layer on fp32
  // copies); a 16-bit GPT block packs its products' operands in it too. `lean`: on a device
  // and in a precision of lean_scratch().
  virtual uint64_t scratch_floats(uint32_t /*rows*/, ops::Precision /*stored*/, bool /*lean*/ = false) const {
    return 0;
  }
  // What the forward alone needs of it, in a Cell that runs forward passes only
  // (Tensors::forward_only): by default as much as either pass.
  virtual uint64_t forward_scratch_floats(uint32_t rows, ops::Precision stored, bool lean = false) const {
    return scratch_floats(rows, stored, lean);
  }
  // The scratch a Cell plans and gives the layer: scratch_floats, or forward_scratch_floats
  // where the Cell runs forward passes only.
  uint64_t cell_scratch_floats(uint32_t rows, ops::Precision stored, bool lean, bool forward_only) const {
    return forward_only ? forward_scratch_floats(rows, stored, lean) : scratch_floats(rows, stored, lean);
  }
  // The 16-bit precisions (bits 1 << ops::Precision) in which this layer's kernels on `device`,
  // reading and writing 16 bits themselves (stores_half), need only scratch_floats(rows,
  // stored, true): a GPT block's attention as flash attention on matrix tiles, no (T,T) scores.
  virtual uint8_t lean_scratch(const vk::PhysicalInfo& /*device*/) const { return 0; }
  virtual Cost cost() const = 0;
  // True when the output IS the input (Flatten): the stage hands the input view on as the
  // output and the output gradient back as the input gradient; forward/backward do nothing.
  virtual bool is_view() const { return false; }
  // True when the input holds int32 token ids rather than floats (there is no input gradient).
  virtual bool integer_input() const { return false; }
  // Whether backward and backward_params read the layer's input and its output (saved()
  // aside): a stage storing 16 bits unpacks only what they read.
  virtual bool backward_reads_input() const { return true; }
  virtual bool backward_reads_output() const { return false; }
  // True when backward writes every element of dx (=) instead of adding into it, so the
  // stage need not clear dx first (a pass over it on every micro-batch).
  virtual bool writes_input_gradient() const { return false; }
  // Where the Cell hands it stored tensors (stores_half): backward also writes dx packed into
  // Tensors::dx_copy, when given, as it writes dx (the same bits as a pack of dx).
  virtual bool writes_input_gradient_copy() const { return false; }
  // Where the Cell hands it stored tensors: backward reads Tensors::dy_copy, when given,
  // instead of packing dy for its products itself.
  virtual bool reads_output_gradient_copy() const { return false; }
  // True when, on `device`, the layer's kernels read x, y and saved tensors as Tensors says
  // they are stored, write y and saved tensors in their precision, and round dx to x's: the
  // Cell then hands it the stored tensors instead of fp32 copies converted around it (the
  // same bits, fewer passes).
  virtual bool stores_half(const vk::PhysicalInfo& /*device*/) const { return false; }
  // True when, where it stores_half, its kernels also read its `product` params' 16-bit copies
  // packed (Tensors::w_precision); the others get those copies in fp32, holding the same values.
  virtual bool reads_half_weights() const { return false; }

  // Records the forward pass: t.y (and t.saved) are overwritten.
  virtual void forward(const Pass& p, const Tensors& t) const = 0;
  // Records the backward pass given dy (rows x output): gradients of Trainable params are
  // ACCUMULATED (+=) into t.grads, and, when dx is given, the input gradient into *dx (+=, or
  // = where writes_input_gradient()).
  // dx is absent for the model's first layer.
  // With p.split (and a non-empty deferred()) it records dx and writes t.deferred instead,
  // leaving t.grads alone.
  virtual void backward(const Pass& p, const Tensors& t, vk::View dy,
                        std::optional<vk::View> dx) const = 0;
  // The second half of a split backward: accumulates the parameter gradients into t.grads
  // from t.deferred (and t.x, t.saved, t.params, unchanged since backward). Called only for
  // layers with a non-empty deferred(), after their split backward of the same micro-batch.
  virtual void backward_params(const Pass&, const Tensors&) const {}
  // Once per training mini-batch, after its last micro-batch's forward (BatchNorm's
  // running statistics).
  virtual void end_minibatch(vk::Commands&, std::span<const vk::View> /*params*/) const {}
};

}  // namespace brigade::model
