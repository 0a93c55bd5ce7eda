// The Executor runs the plan's schedule over its stages: one host thread per stage walks
// its action list, recording and submitting the work of that stage's cells (one, or V
// under an interleaved schedule) on its own device's queue; timeline semaphores order
// everything between devices. Links carry activations forward and gradients backward
// between neighbouring cells (fd, host or staging path per pair of devices), relay threads
// pass each transfer's completion from the producer's device to the consumer's. After the
// backward of every micro-batch, the Step action sums tied gradients across cells, takes
// the global gradient norm, and applies one synchronous optimizer update per stage.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/model.h"
#include "optim/optimizer.h"
#include "pipeline/batch.h"
#include "pipeline/abort.h"
#include "pipeline/link.h"
#include "pipeline/plan.h"
#include "pipeline/relay.h"
#include "pipeline/schedule.h"
#include "pipeline/stage.h"
#include "pipeline/trace.h"

namespace brigade::pipeline {

struct ExecutorOptions {
  LinkKind link = LinkKind::Auto;
  uint32_t slots = kLinkSlots;  // buffers per link and direction
  // The path of each boundary between cells c and c+1, chosen beforehand (choose_links, as
  // `brigade plan` shows); empty: the executor chooses them from `link` itself.
  std::vector<LinkChoice> links;
};

// The path of each boundary between neighbouring cells of a K-stage pipeline with `cells`
// cells (cell c on devices[c % K]): each pair of devices is probed once.
std::vector<LinkChoice> choose_links(const std::vector<vk::Device*>& devices, uint32_t cells,
                                     LinkKind requested);

// What a training step does after the backward passes. Without an optimizer the step only
// completes the gradients (brigade step).
struct Update {
  const optim::Optimizer* optimizer = nullptr;
  optim::Step step;
  double max_norm = 0;  // global gradient-norm clipping; 0 = off
};

struct StepResult {
  double loss = 0;
  double grad_norm = 0;  // global L2 norm of the gradients, before clipping
  Trace trace;
};

// A training step whose loss or gradients are not finite (NaN or infinite): the message
// names the step, the stage and its device, and the layer; no parameter was updated.
struct NonFinite : UserError {
  using UserError::UserError;
};

struct EvalResult {
  double loss = 0;       // mean cross-entropy over the batch's rows x targets_per_sample
  uint64_t correct = 0;  // targets the logits' argmax names
};

class Executor {
 public:
  // One device per stage of the plan (a device may back only one stage); the plan holds the
  // schedule.
  Executor(const model::Model& model, std::vector<vk::Device*> devices, const Plan& plan,
           ExecutorOptions options);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  uint32_t stages() const { return uint32_t(devices_.size()); }
  uint32_t cells() const { return uint32_t(cells_.size()); }
  Stage& cell(uint32_t c) { return *cells_.at(c); }
  const Plan& plan() const { return plan_; }
  const Schedule& schedule() const { return schedule_; }
  LinkKind link_kind(uint32_t boundary) const { return act_links_.at(boundary)->kind(); }
  const LinkChoice& link_choice(uint32_t boundary) const { return options_.links.at(boundary); }

  // Parameters by name: a tied parameter is written to (and read from) every stage holding it.
  void set_parameter(const std::string& name, const std::vector<float>& values);
  // Every learnable parameter from the model's initializer (model::initial_values) with
  // `seed`; buffers of running statistics keep their initial contents.
  void initialize_parameters(uint64_t seed);
  std::vector<float> parameter(const std::string& name) const;
  std::vector<float> gradient(const std::string& name) const;
  // Every cell's copy of a parameter (tests: tied copies stay identical).
  std::vector<std::vector<float>> parameter_copies(const std::string& name) const;

  // Registers every trainable parameter (each stage's copy) with the optimizer.
  void attach(optim::Optimizer& optimizer);

  // One training mini-batch: forward and backward of every micro-batch, then the step
  // (gradients complete; parameters updated when `update` has an optimizer).
  StepResult train(const Batch& batch, const Update& update = {});
  // Forward only, in evaluation mode (BatchNorm uses its running statistics), over the
  // micro-batches of the same plan. With `outputs`, the last layer's output of every row is
  // copied there (rows x elements of the last layer's output).
  EvalResult evaluate(const Batch& batch, std::vector<float>* outputs = nullptr);

 private:
  struct Signals;
  // Runs `schedule` over the batch on every stage's thread; rethrows the first failure.
  void run(const Schedule& schedule, const Batch& batch, const Update& update,
           std::vector<float>* outputs);
  void run_stage(uint32_t k, const Schedule& schedule, const Batch& batch, const Update& update,
                 std::vector<float>* outputs);
  // Returns the clip coefficient for this step's update, or nothing when the step must not
  // update (a non-finite loss or gradient, thrown as NonFinite by one stage).
  std::optional<double> step_stage(uint32_t k, const Update& update);
  std::string first_non_finite_parameter(uint32_t c);
  std::string non_finite_message(uint32_t c, uint64_t step) const;
  void calibrate();

  const model::Model& model_;
  std::vector<vk::Device*> devices_;
  Plan plan_;
  ExecutorOptions options_;
  Schedule schedule_, eval_schedule_;
  Slots slots_, eval_slots_;  // the buffers each action of either schedule uses
  std::vector<std::unique_ptr<Stage>> cells_;                  // [cell c], on devices_[c % K]
  std::vector<std::unique_ptr<Link>> act_links_, grad_links_;  // [boundary b] : cell b <-> b+1
  std::vector<std::unique_ptr<Signals>> signals_;              // [cell]
  Abort abort_;
  std::vector<std::unique_ptr<Relay>> relays_;  // [boundary][4]: activation, freed, gradient, freed
  std::vector<double> clock_offset_us_;         // per stage: GPU timestamp -> host steady clock
  // Transfer sequence numbers: forward runs (training and evaluation) and backward runs.
  uint64_t forward_runs_ = 0, backward_runs_ = 0;
  bool broken_ = false;
  // Step coordination between the stage threads.
  struct Shared;
  std::unique_ptr<Shared> shared_;
};

}  // namespace brigade::pipeline
