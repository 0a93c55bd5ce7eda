// The pipeline schedule as data: for each stage, the ordered list of actions it performs in
// one mini-batch. Built by pure functions, checked without a GPU, run by an executor. A new
// schedule (1F1B, interleaved, ...) is a new builder over the same action vocabulary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace brigade::pipeline {

enum class Op : uint8_t {
  RecvActivation,  // wait for micro-batch i's input from the previous stage
  Forward,         // run the cell's forward on micro-batch i
  SendActivation,  // hand micro-batch i's output to the next stage
  RecvGradient,    // wait for the gradient of micro-batch i's output from the next stage
  Recompute,       // re-materialize micro-batch i's activations from its saved input
  Backward,        // run the cell's backward on micro-batch i (gradients accumulate)
  SendGradient,    // hand the gradient of micro-batch i's input to the previous stage
  Step,            // one synchronous optimizer step for the whole mini-batch
};

struct Action {
  Op op;
  uint32_t micro_batch = 0;  // unused by Step
  bool operator==(const Action&) const = default;
};

enum class Remat : uint8_t { Never, Always, ExceptLast };

struct Schedule {
  uint32_t stages = 0, micro_batches = 0;
  bool training = true;  // every micro-batch goes forward and backward; else forward only
  std::vector<std::vector<Action>> actions;  // [stage] -> in order
};

// GPipe's fill-drain schedule: every stage runs all M forwards, then all M backwards in
// reverse micro-batch order, then one optimizer step.
Schedule gpipe(uint32_t stages, uint32_t micro_batches, Remat remat);

// Evaluation: every stage runs all M forwards, nothing else.
Schedule forward_only(uint32_t stages, uint32_t micro_batches);

// Short names: "F3", "B0", "R2", "sA1" (send activation), "rG1" (receive gradient), "S".
std::string to_string(const Action& a);
// One line per stage: "stage 1: rA0 F0 sA0 ... S".
std::string to_string(const Schedule& s);

// Simulates the schedule with blocking receives and non-blocking sends. Returns "" when every
// stage finishes, else a description of the deadlock or of a mismatched send/receive.
std::string check(const Schedule& s);

Remat parse_remat(const std::string& text);  // "never" | "always" | "except-last"
const char* remat_name(Remat r);

}  // namespace brigade::pipeline
