// The executor's state shared between its stage threads (engine/pipeline/executor.cpp runs
// the schedule, executor_step.cpp the host part of the Step action). Not for other users.
#pragma once

#include <barrier>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "optim/clip.h"
#include "pipeline/counter.h"
#include "pipeline/executor.h"

namespace brigade::pipeline {

inline constexpr uint64_t kFloat = 4;
enum RelayRole { kActivation, kActivationFreed, kGradient, kGradientFreed, kRoles };

// What a stage's thread waits for, advanced by relays: a boundary tensor arrived, or a link
// slot this stage writes was consumed on the other side. Values are transfer sequence
// numbers + 1.
struct Executor::Signals {
  Counter act_ready, act_free, grad_ready, grad_free;
  void jump() {
    for (Counter* c : {&act_ready, &act_free, &grad_ready, &grad_free}) c->advance(UINT64_MAX);
  }
};

struct Executor::Shared {
  std::unique_ptr<std::barrier<>> barrier;
  std::map<std::string, std::vector<uint32_t>> holders;      // parameter -> cells, in order
  std::map<std::string, std::vector<std::vector<float>>> tied;  // parameter -> per-cell gradient
  std::vector<double> squared;                                // per cell
  std::vector<std::vector<ActionEvent>> events;               // per stage
  std::vector<std::vector<std::unique_ptr<vk::Commands>>> ring;  // per stage, one per GPU action
  std::vector<uint32_t> rows;                                 // this mini-batch's micro-batches
  uint32_t total_rows = 0;
  double grad_norm = 0;  // written by stage 0's thread
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
  double loss = 0;               // this step's, written by the last cell's thread
};

}  // namespace brigade::pipeline
