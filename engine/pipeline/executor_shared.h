// The executor's state shared between its stage threads (engine/pipeline/executor.cpp runs
// the schedule, executor_step.cpp the host part of the Step action). Not for other users.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "optim/clip.h"
#include "pipeline/executor.h"

namespace brigade::pipeline {

inline constexpr uint64_t kFloat = 4;

struct Executor::Shared {
  // The stage threads of this process as a Group (the Step's sums when there are no ranks).
  std::shared_ptr<ThreadGroup::Shared> threads;
  std::map<std::string, std::vector<uint32_t>> holders;  // parameter -> cells, in order
  std::map<std::string, uint64_t> tied;                  // parameter held by several cells -> elements
  // This run's share of the mini-batch: its first row and its rows, of `total_rows`.
  uint32_t first_row = 0;
  std::vector<std::vector<ActionEvent>> events;               // per stage
  std::vector<std::vector<std::unique_ptr<vk::Commands>>> ring;  // per stage, one per GPU action
  std::vector<uint32_t> rows;                                 // this share's micro-batches
  uint32_t total_rows = 0;
  double grad_norm = 0;  // written by the first local stage's thread
  // Per cell: the reduction over the gradients it owns.
  struct Norm {
    std::unique_ptr<optim::GradNorm> reduce;
    std::unique_ptr<vk::Commands> commands;
    std::vector<std::string> names;  // of the reduced gradients, in order
    bool in_backward = false;        // recorded at the end of the cell's last gradient action
  };
  std::vector<Norm> norms;
  std::vector<std::string> bad;        // per cell: the deepest parameter with a non-finite gradient
  std::vector<std::string> bad_param;  // per cell, after a non-finite loss: the first non-finite parameter
  double loss = 0;  // this step's, over every replica; written by the first local stage's thread
};

}  // namespace brigade::pipeline
