// What the executor's stage threads share (executor.cpp builds it, stage_runner*.cpp use it):
// the fixed layout, built once, and one run's state and results. Not for other users.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "optim/clip.h"
#include "pipeline/executor.h"

namespace brigade::pipeline {

struct Executor::Shared {
  std::map<std::string, std::vector<uint32_t>> holders;  // parameter -> cells, in order
  std::map<std::string, uint64_t> tied;                  // parameter held by several cells -> elements
  // Per stage: the Commands of each GPU action of a run (a backward summed in buckets takes
  // one per piece), made as runs need them. One set per kind of run (training or evaluation)
  // and turn of the link slots its transfers start in (Link: transfer n takes slot n % slots),
  // so that an action finds the recording it made in the last run like it, to replay.
  std::vector<std::map<uint64_t, std::vector<std::unique_ptr<vk::Commands>>>> rings;
  // Per cell: the reduction over the gradients it owns.
  struct Norm {
    std::unique_ptr<optim::GradNorm> reduce;
    std::unique_ptr<vk::Commands> commands;
    std::vector<std::string> names;  // of the reduced gradients, in order
    bool in_backward = false;        // recorded at the end of the cell's last gradient action
  };
  std::vector<Norm> norms;
  // Per cell holding a tied parameter: the copies of those gradients to the host and back
  // (Cell::copy_tied_gradients), the same every step.
  struct TiedCopies {
    std::unique_ptr<vk::Commands> to_host, back;
  };
  std::vector<TiedCopies> tied_copies;
  uint32_t writer = 0;  // the first stage this process runs: its thread writes the run's results
};

struct Executor::RunState {
  // This replica's share of the mini-batch, of `total_rows`, and its micro-batches' rows.
  Share share;
  uint32_t total_rows = 0;
  std::vector<uint32_t> rows;
  // Results.
  std::vector<std::vector<ActionEvent>> events;  // per stage
  double loss = 0;       // the step's, over every replica
  double grad_norm = 0;  // global L2 norm of the gradients, before clipping
  bool skipped = false;  // under loss scaling: the gradients were not finite
  double loss_scale = 1; // the last training step's (gradient() divides it out)
  std::vector<std::string> bad;        // per cell: the deepest parameter with a non-finite gradient
  std::vector<std::string> bad_param;  // per cell, after a non-finite loss: the first non-finite parameter
};

}  // namespace brigade::pipeline
