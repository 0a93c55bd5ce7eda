// One stage thread's walk through its schedule for one run of the executor: a method per
// action (receive, forward, send, recompute, backward, weight gradient, step), with the
// walk's own cursor: per cell of the stage, the transfer numbers it has taken and the queue
// values of its micro-batches' submissions. A stage thread waits on the host for a link's
// word before the submission that needs it, so no device queue ever holds a submission
// waiting on another device. Internal to the executor (executor.cpp makes one per stage).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "pipeline/buckets.h"
#include "pipeline/executor.h"

namespace brigade::pipeline {

class StageRunner {
 public:
  StageRunner(Executor& ex, uint32_t stage, const Schedule& schedule, const Slots& slots, const Batch& batch,
              const Update& update, std::vector<float>* outputs);
  // Walks every action. False when the walk stopped early: this thread failed (the failure
  // raised on the executor's abort) or another did.
  bool run();

 private:
  // Where a stage's cell is in the walk. Transfer numbers start at the micro-batches run
  // before this one, and go on across steps and evaluations.
  struct Cursor {
    uint64_t recv_act = 0, send_act = 0, recv_grad = 0, send_grad = 0;
    // Per micro-batch: the transfer numbers it took, and its submissions' queue values.
    std::vector<uint64_t> act_in, act_out, grad_in, grad_out, fwd_value, bwd_value;
    std::vector<uint64_t> input_used;  // per input slot: the last submission reading it
    bool first_forward = true, first_backward = true;
    size_t last_gradient = SIZE_MAX;  // the action after which the cell's gradients are complete
  };

  void receive_activation(const Action& a);
  void forward(const Action& a, const MicroBatch& mb);
  void send_activation(const Action& a);
  void receive_gradient(const Action& a);
  void recompute(const Action& a, const MicroBatch& mb);
  void backward(const Action& a, const MicroBatch& mb);
  void send_gradient(const Action& a);
  void weight_gradient(const Action& a, const MicroBatch& mb);
  // False when the step must not go on (a non-finite step another stage reports, an abort).
  bool step(const Action& a);
  // Sums cell s's gradients `names` over the replicas once the queue reaches `value`, on the
  // BucketSums thread; the Step waits for every sum and uploads them.
  void sum_over_replicas(Cell& s, uint64_t value, const std::vector<std::string>& names);

  // The Step's host part (stage_runner_step.cpp): sums over replicas, tied copies and the
  // pipeline; the clip coefficient, or nothing when the step must not update.
  std::optional<double> step_sums();
  std::string first_non_finite_parameter(uint32_t c);
  std::string non_finite_message(uint32_t c, uint64_t step, double loss) const;

  // The action's recording: the next Commands of the run's ring, reset, timestamped.
  vk::Commands& begin(const Action& a);
  uint64_t submit(vk::Commands& cmd);
  // Blocks on a link (f returns false when stopped), kept out of the recording time.
  template <class F>
  void wait(F&& f);
  // The thread's CPU time under ExecutorOptions::cpu_times, else 0.
  double cpu_us() const;
  // Marks micro-batch mb's kept input slot as read by the submission `value`.
  uint64_t used(const MicroBatch& mb, uint64_t value);
  // The mini-batch row micro-batch i starts at.
  uint64_t first_row(uint32_t i) const;
  // The walk's actions done: wait for the device, then the trace's GPU times.
  void finish();

  Executor& ex_;
  const uint32_t k_;
  const Schedule& schedule_;
  const Batch& batch_;
  const Update& update_;
  std::vector<float>* outputs_;
  const Slots& slots_;
  vk::Device& dev_;
  Group& group_;  // the pipeline's sums, as this stage takes part
  std::vector<Cursor> cursors_;  // per cell of the stage
  size_t x_ = 0;                 // the action being run
  // Host time blocked in waits and the step's sums, kept out of record_us.
  double waited_us_ = 0, waited_cpu_us_ = 0;
  bool skipped_ = false;  // step_sums: the loss scale was too large, no update (Update::loss_scale)
  // This run's Commands (Executor::Shared::rings), and the next action's among them.
  std::vector<std::unique_ptr<vk::Commands>>* ring_ = nullptr;
  size_t next_cmd_ = 0;
  std::vector<std::pair<vk::Commands*, ActionEvent>> recorded_;
  uint64_t last_value_ = 0;
  // The replicas' sums of the cells' gradients, pushed by their last backward (buckets.h).
  std::unique_ptr<BucketSums> sums_;
  // The action being recorded: its start, less the waits so far, and its Commands' counts.
  double open_start_us_ = 0, open_cpu_us_ = 0;
  uint32_t open_dispatches_ = 0, open_barriers_ = 0;
};

}  // namespace brigade::pipeline
