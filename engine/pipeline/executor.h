// The Executor runs the plan's schedule over its stages: one host thread per stage walks
// its action list, recording and submitting the work of that stage's cells (one, or V
// under an interleaved schedule) on its own device's queue; timeline semaphores order
// everything between devices. Links carry activations forward and gradients backward
// between neighbouring cells: in one process on memory both devices see (fd, host or
// staging path per pair of devices), between processes as MPI messages. After the backward
// of every micro-batch, the Step action sums the gradients of data-parallel replicas and of
// tied parameters, takes the global gradient norm, and applies one synchronous optimizer
// update per stage.
//
// One process runs every stage, or (Ranks) one stage of one replica of a pipeline whose
// other stages and replicas run in other processes; the schedule and the Step are the same.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/model.h"
#include "optim/optimizer.h"
#include "pipeline/batch.h"
#include "pipeline/abort.h"
#include "pipeline/group.h"
#include "pipeline/link.h"
#include "pipeline/plan.h"
#include "pipeline/schedule.h"
#include "pipeline/stage.h"
#include "pipeline/trace.h"

namespace brigade::pipeline {

// The side in this process of a link to a cell in another process.
struct RemoteEnd {
  uint32_t boundary = 0;    // between cells boundary and boundary + 1
  bool gradient = false;    // backward (from boundary + 1 to boundary) rather than forward
  bool producer = false;    // this process writes it (else reads it)
  uint32_t peer_stage = 0;  // the stage on the other side
  vk::Device* device = nullptr;  // this side's
  uint64_t bytes = 0;
  uint32_t slots = 0;
  std::string name;
};

// This process's part of a pipeline that runs as several processes: stage `stage` of
// replica `replica`, which takes its share of every mini-batch (split_rows over the
// replicas, in order). Built by mpi::World.
struct Ranks {
  uint32_t stage = 0;
  uint32_t replica = 0, replicas = 1;
  Group* pipeline = nullptr;  // the K processes of this replica, in stage order
  Group* replica_group = nullptr;  // the R processes running this stage, in replica order
  std::function<std::unique_ptr<Link>(const RemoteEnd&)> link;
};

struct ExecutorOptions {
  LinkKind link = LinkKind::Auto;
  uint32_t slots = kLinkSlots;  // buffers per link and direction
  // The path of each boundary between cells c and c+1, chosen beforehand (choose_links, as
  // `brigade plan` shows); empty: the executor chooses them from `link` itself.
  std::vector<LinkChoice> links;
  // Set: this process runs one stage (devices holds only its device; the others are null).
  const Ranks* ranks = nullptr;
};

// The path of each boundary between neighbouring cells of a K-stage pipeline with `cells`
// cells (cell c on devices[c % K]): each pair of devices is probed once. A null device is in
// another process: its boundaries are MPI messages.
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
  // One device per stage of the plan (a device may back only one stage; with options.ranks,
  // only that stage's device is given, the others are null); the plan holds the schedule.
  Executor(const model::Model& model, std::vector<vk::Device*> devices, const Plan& plan,
           ExecutorOptions options);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  uint32_t stages() const { return uint32_t(devices_.size()); }
  uint32_t cells() const { return uint32_t(cells_.size()); }
  Stage& cell(uint32_t c) { return *cells_.at(c); }
  // Whether cell c runs in this process.
  bool local(uint32_t c) const { return cells_.at(c) != nullptr; }
  const Plan& plan() const { return plan_; }
  const Schedule& schedule() const { return schedule_; }
  LinkKind link_kind(uint32_t boundary) const { return options_.links.at(boundary).kind; }
  const LinkChoice& link_choice(uint32_t boundary) const { return options_.links.at(boundary); }

  // Parameters by name: a tied parameter is written to (and read from) every stage holding it.
  // With ranks, only this process's cells: a parameter held elsewhere is not written, and
  // reading one is an error (held() lists what is here).
  void set_parameter(const std::string& name, const std::vector<float>& values);
  // The parameters (learnable and buffers) held by this process's cells, in model order.
  std::vector<std::string> held() const;
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
  // Runs `schedule` over the batch on every stage's thread; rethrows the first failure.
  void run(const Schedule& schedule, const Batch& batch, const Update& update,
           std::vector<float>* outputs);
  void run_stage(uint32_t k, const Schedule& schedule, const Batch& batch, const Update& update,
                 std::vector<float>* outputs, Group& pipeline);
  // Returns the clip coefficient for this step's update, or nothing when the step must not
  // update (a non-finite loss or gradient, thrown as NonFinite by one stage).
  std::optional<double> step_stage(uint32_t k, const Update& update, Group& pipeline);
  std::string first_non_finite_parameter(uint32_t c);
  std::string non_finite_message(uint32_t c, uint64_t step, double loss) const;
  void calibrate();

  const model::Model& model_;
  std::vector<vk::Device*> devices_;
  Plan plan_;
  ExecutorOptions options_;
  Schedule schedule_, eval_schedule_;
  Slots slots_, eval_slots_;  // the buffers each action of either schedule uses
  std::vector<std::unique_ptr<Stage>> cells_;                  // [cell c], on devices_[c % K]
  Abort abort_;
  // [boundary b] : cell b <-> b+1; null where neither cell is in this process.
  std::vector<std::unique_ptr<Link>> act_links_, grad_links_;
  std::vector<double> clock_offset_us_;         // per stage: GPU timestamp -> host steady clock
  // Transfer sequence numbers: forward runs (training and evaluation) and backward runs.
  uint64_t forward_runs_ = 0, backward_runs_ = 0;
  bool broken_ = false;
  // Step coordination between the stage threads.
  struct Shared;
  std::unique_ptr<Shared> shared_;
};

}  // namespace brigade::pipeline
