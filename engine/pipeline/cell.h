// A Cell is a contiguous run of layers on one stage's device: it owns their parameters, their
// gradients and every activation buffer of its CellLayout, and records the forward,
// re-materialized forward and backward of a micro-batch (a forward-only cell, the forward
// alone: CellLayout::training). Ordering between cells is not its business: the executor
// decides what to wait for and when to submit.
#pragma once

#include <map>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/model.h"
#include "pipeline/activations.h"
#include "pipeline/plan.h"
#include "vk/buffer.h"
#include "vk/commands.h"

namespace brigade::pipeline {

// What a pass of one micro-batch needs to know about the mini-batch.
struct MicroBatch {
  uint32_t index = 0;
  uint32_t input = 0;       // the slot of the cell's kept inputs (and targets) it uses
  uint32_t set = 0;         // the set of layer activations it uses
  uint32_t deferred = 0;    // split backward: the set of deferred gradients, from B to W
  uint32_t rows = 0;        // samples in this micro-batch
  uint32_t total_rows = 0;  // samples in the mini-batch
  uint32_t step = 0;        // optimizer step, for random keys
  bool training = true;
  float loss_scale = 1;     // the backward starts from the loss times this
};

class Cell {
 public:
  Cell(vk::Device& device, const model::Model& model, CellLayout layout);

  vk::Device& device() const { return device_; }
  const CellLayout& layout() const { return layout_; }

  // Host-side inputs of a micro-batch, by its input slot: the first cell's input (images or
  // tokens), the last cell's targets.
  vk::Buffer& input(uint32_t slot) { return inputs_.at(slot); }
  vk::Buffer& targets(uint32_t slot) { return targets_.at(slot); }

  // Records micro-batch mb's forward. `received`, when given, is the previous stage's output
  // and is copied into the kept input first. On the last stage the loss of the micro-batch
  // is added to loss() (not when `recompute`). Returns the view of the stage's output.
  vk::View forward(vk::Commands& cmd, const MicroBatch& mb, std::optional<vk::View> received,
                   bool recompute);
  // Records micro-batch mb's backward. `received` is the gradient of the stage's output from
  // the next stage (absent on the last stage, where the loss starts it). Parameter gradients
  // accumulate. Returns the gradient of the stage's input (absent on the first stage).
  // `split`: the parameter gradients of layers that can defer them are left for
  // backward_params (zero-bubble's W), which must follow with the same micro-batch and set.
  // `after_layer`, when given, is called after each layer's backward is recorded, with the
  // layer's index in the cell, and returns the Commands to record the rest into (a caller
  // may submit what it has so far: the replicas' sum in buckets, buckets.h).
  using AfterLayer = std::function<vk::Commands&(uint32_t layer, vk::Commands& cmd)>;
  std::optional<vk::View> backward(vk::Commands& cmd, const MicroBatch& mb,
                                   std::optional<vk::View> received, bool split = false,
                                   const AfterLayer& after_layer = {});
  void backward_params(vk::Commands& cmd, const MicroBatch& mb);
  // Evaluation only: records cross-entropy's accuracy count of micro-batch mb into correct().
  void count_correct(vk::Commands& cmd, const MicroBatch& mb);

  // Profiling: when set, forward and backward record a GPU timestamp before their first
  // layer and after each layer, appending the indices (backward walks the layers in reverse).
  void set_marks(std::vector<uint32_t>* forward, std::vector<uint32_t>* backward) {
    forward_marks_ = forward, backward_marks_ = backward;
  }

  // Makes the weight copies of the cell's 16-bit layers (CellLayout::weight_copies) from the
  // fp32 masters: before a run's first forward, once the parameters are what it will read.
  void refresh_weight_copies(vk::Commands& cmd);

  void zero_gradients(vk::Commands& cmd);
  void zero_loss(vk::Commands& cmd);
  void end_minibatch(vk::Commands& cmd);

  // Last stage: the mini-batch's loss (F32, sum over its micro-batches) and correct count (U32).
  const vk::Buffer& loss() const { return loss_; }
  const vk::Buffer& correct() const { return correct_; }

  bool holds(const std::string& param) const { return params_.count(param) != 0; }
  // The gradients of the tied parameters (CellLayout::tied) pass through the cell's host memory
  // for them, where the step sums the cells' copies: copy_tied_gradients records the copies of
  // all of them there (to_host) or back; tied_host is a parameter's, in host memory.
  void copy_tied_gradients(vk::Commands& cmd, bool to_host);
  float* tied_host(const std::string& name);
  vk::Buffer& param(const std::string& name) { return params_.at(name); }
  vk::Buffer& gradient(const std::string& name) { return grads_.at(name); }
  // Trainable parameters of the cell, in model order (a forward-only cell holds no gradients).
  const std::vector<std::string>& trainable() const { return trainable_; }

 private:
  using Set = ActivationSet;
  // The views the cell's layer l works on for micro-batch mb, as stored (16 bits or 32).
  vk::View x_view(uint32_t l, const MicroBatch& mb);
  vk::View y_view(uint32_t l, const MicroBatch& mb);
  ops::Precision x_precision(uint32_t l) const {
    return l ? layout_.output_precision[l - 1] : layout_.input_precision;
  }
  // Whether layer l keeps its saved tensor s in 16 bits.
  bool narrow(uint32_t l, const model::SavedSpec& s) const;
  // Whether layer l takes its 16-bit tensors as stored, as the plan decided
  // (CellLayout::direct): then it gets no fp32 copies.
  bool direct(uint32_t l) const;
  // fp32 memory for 16-bit tensors: part 0 and 1 a layer's input or output, part 2 its
  // saved tensors from `offset` floats.
  vk::View work(uint32_t part, uint64_t floats, uint64_t offset = 0);
  // `stored` as fp32: itself, or unpacked into work part `part`.
  vk::View fp32(vk::Commands& cmd, vk::View stored, ops::Precision p, uint64_t n, uint32_t part);
  // Layer l's tensors as its kernels read them in a backward: the 16-bit ones it reads unpacked.
  model::Tensors unpacked(vk::Commands& cmd, uint32_t l, const MicroBatch& mb, const model::Tensors& t,
                          std::vector<vk::View>& saved32);
  uint64_t in_floats(uint32_t l, const MicroBatch& mb) const;
  uint64_t out_floats(uint32_t l, const MicroBatch& mb) const;
  vk::View targets_view(const MicroBatch& mb);
  // Layer l's tensors for micro-batch mb; `saved` holds the views t.saved points into.
  model::Tensors tensors(uint32_t l, const MicroBatch& mb, std::vector<vk::View>& saved,
                         std::vector<vk::View>& deferred);
  model::Pass pass(vk::Commands& cmd, const MicroBatch& mb, uint32_t l, bool recompute) const;
  bool splits(uint32_t l) const { return !layout_.deferred_bytes[l].empty(); }
  // Whether layer l must compute its input gradient: not when nothing before it in the
  // model has a gradient to receive.
  bool wants_input_gradient(uint32_t l) const;

  vk::Device& device_;
  const model::Model& model_;
  CellLayout layout_;
  vk::Buffer param_arena_, grad_arena_;  // the trainable parameters and their gradients (layout_.arena())
  std::map<std::string, vk::Buffer> params_, grads_;  // parts of the arenas, or buffers of their own
  std::vector<std::string> trainable_;
  // Per layer of the cell: views of its params and gradients, in params() order.
  std::vector<std::vector<vk::View>> param_views_, grad_views_;
  // What layers' kernels read: param_views_ with each weight copy in place of its master.
  vk::Buffer copy_arena_;
  std::vector<vk::Buffer> copies_;
  std::vector<std::vector<vk::View>> kernel_views_;
  std::vector<ops::Precision> weight_precision_;  // per layer: how its copies are stored (Tensors::w_precision)
  std::vector<vk::Buffer> inputs_, targets_;
  std::vector<Set> sets_;
  std::vector<std::vector<std::vector<vk::Buffer>>> deferred_;  // [slot][layer][spec]: B to W
  vk::Buffer grad_a_, grad_b_, scratch_;
  vk::Buffer workspace_;  // the products' (vk::Commands::workspace), set by pass()
  vk::Buffer copy_a_, copy_b_;  // CellLayout::gradient_copy_bytes: gradients handed on packed
  vk::Buffer work_, grad_out_;  // CellLayout::work_bytes, gradient_out_bytes
  vk::Buffer loss_, discard_, correct_;
  std::map<std::string, vk::Buffer> tied_host_;  // per CellLayout::tied name
  std::vector<uint32_t>* forward_marks_ = nullptr;
  std::vector<uint32_t>* backward_marks_ = nullptr;
};

}  // namespace brigade::pipeline
