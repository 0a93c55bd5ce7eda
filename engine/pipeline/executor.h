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
// Where the stages run is the Topology's business (topology.h): every stage in this process,
// or one stage of one replica of a pipeline whose other stages and replicas run in other
// processes; the executor, the schedule and the Step are the same.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/model.h"
#include "optim/optimizer.h"
#include "pipeline/batch.h"
#include "vk/clock.h"
#include "pipeline/abort.h"
#include "pipeline/group.h"
#include "pipeline/link.h"
#include "pipeline/plan.h"
#include "pipeline/schedule.h"
#include "pipeline/cell.h"
#include "pipeline/topology.h"
#include "pipeline/trace.h"

namespace brigade::pipeline {

struct ExecutorOptions {
  LinkKind link = LinkKind::Auto;
  uint32_t slots = kLinkSlots;  // buffers per link and direction
  // The path of each boundary between cells c and c+1, chosen beforehand (choose_links, as
  // `brigade plan` shows); empty: the executor chooses them from `link` itself.
  std::vector<LinkChoice> links;
  // Data-parallel replicas: the gradients summed in buckets of about this many bytes while
  // the backward goes on (pipeline/buckets.h); 0 sums them all after the backward.
  uint64_t bucket_bytes = uint64_t(25) << 20;  // PyTorch DDP's bucket_cap_mb
  // Each action's command buffer submitted again when the action makes the same calls as in
  // the last run (vk::Commands::set_replay); off: recorded every time.
  bool replay = true;
  // Each action's recording timed in the stage thread's CPU time too (ActionEvent::record_cpu_us):
  // a system call at each end of an action and of each wait inside it.
  bool cpu_times = false;
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
  // The backward starts from the loss times this (optim::LossScale); gradients are divided
  // by it again before clipping and the update, and by gradient().
  double loss_scale = 1;
  // Dynamic loss scaling (fp16 stages): gradients that are not finite while the loss is skip
  // the step, updating nothing, rather than stop it, while loss_scale is above
  // LossScale::kMinimum; there the overflow is not the scale's, and the step stops as in fp32.
  bool skips = false;
  // The run's step, from 1, where it differs from step.t (which counts the updates made, the
  // skipped steps left out): the errors and dropout's masks name it. 0: step.t.
  uint64_t number = 0;
  uint64_t run_step() const { return number ? number : step.t; }
};

struct StepResult {
  double loss = 0;
  double grad_norm = 0;  // global L2 norm of the gradients, before clipping
  bool skipped = false;  // under loss scaling: gradients not finite, nothing updated
  // Per stage of this pipeline, wherever it runs: its actions' GPU time, the Step's left out.
  std::vector<double> busy_ms;
  Trace trace;  // this process's stages
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
  // One device per stage of the plan (a device may back only one stage), null for the stages
  // `topology` runs in other processes; the plan holds the schedule. Without a topology,
  // every stage runs in this process (OneProcess).
  Executor(const model::Model& model, std::vector<vk::Device*> devices, const Plan& plan,
           ExecutorOptions options, std::unique_ptr<Topology> topology = nullptr);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  uint32_t stages() const { return uint32_t(devices_.size()); }
  uint32_t cells() const { return uint32_t(cells_.size()); }
  Cell& cell(uint32_t c) { return *cells_.at(c); }
  // Whether cell c runs in this process.
  bool local(uint32_t c) const { return cells_.at(c) != nullptr; }
  const Plan& plan() const { return plan_; }
  const Schedule& schedule() const { return schedule_; }
  LinkKind link_kind(uint32_t boundary) const { return options_.links.at(boundary).kind; }
  const LinkChoice& link_choice(uint32_t boundary) const { return options_.links.at(boundary); }

  // Parameters by name: a tied parameter is written to (and read from) every stage holding it.
  // Only this process's cells: a parameter held in another process is not written, and
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
  // Training steps, from any step, until every action has recorded its commands once: the link
  // slots turn from step to step, and each turn keeps recordings of its own to replay
  // (vk::Commands::set_replay). What a benchmark warms up with, so that every step it times is
  // as the steps of a long run are.
  uint32_t recording_turns() const;
  // Forward only, in evaluation mode (BatchNorm uses its running statistics), over the
  // micro-batches of the same plan. With `outputs`, the last layer's output of every row is
  // copied there (rows x elements of the last layer's output).
  EvalResult evaluate(const Batch& batch, std::vector<float>* outputs = nullptr);

 private:
  friend class StageRunner;
  // Runs `schedule` over the batch on every local stage's thread; rethrows the first failure.
  void run(const Schedule& schedule, const Slots& slots, const Batch& batch, const Update& update,
           std::vector<float>* outputs);
  // The buffers each action of an evaluation schedule uses (the schedule checked first).
  Slots eval_slots(const Schedule& eval) const;
  // The constructor's parts, in order.
  void check_devices();
  void lay_out_slots();
  void build_links();
  void build_norms();
  void build_ring();
  void zero_state();
  void calibrate(bool again = false);

  const model::Model& model_;
  std::vector<vk::Device*> devices_;
  Plan plan_;
  ExecutorOptions options_;
  std::unique_ptr<Topology> topology_;
  Schedule schedule_, eval_schedule_;
  Slots slots_, eval_slots_;  // the buffers each action of either schedule uses
  // Evaluations of fewer micro-batches than planned (a split's last batch, short of M rows),
  // by their number: the schedule and its slots.
  std::map<uint32_t, std::pair<Schedule, Slots>> short_evals_;
  std::vector<std::unique_ptr<Cell>> cells_;  // [cell c], on devices_[c % K]; null elsewhere
  Abort abort_;
  // [boundary b] : cell b <-> b+1; null where neither cell is in this process.
  std::vector<std::unique_ptr<Link>> act_links_, grad_links_;
  // Per stage: a GPU timestamp and the host's steady clock at it (calibrate(), taken again
  // before a run once 30 s old where the device reads both at once: the clocks drift apart).
  std::vector<vk::GpuClock> clocks_;
  double calibrated_us_ = 0;
  // Transfer sequence numbers: the micro-batches run forward (training and evaluation) and
  // backward so far.
  uint64_t forwards_ = 0, backwards_ = 0;
  bool broken_ = false;
  // What the stage threads share: the fixed layout, and the run's results.
  struct Shared;
  struct RunState;
  std::unique_ptr<Shared> shared_;
  std::unique_ptr<RunState> state_;
};

}  // namespace brigade::pipeline
