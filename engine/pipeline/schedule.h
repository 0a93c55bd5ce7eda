// The pipeline schedule as data: for each stage (device), the ordered list of actions it
// performs in one mini-batch. Built by pure functions, checked without a GPU, run by an
// executor. Each schedule is a builder over the same action vocabulary:
//   gpipe        fill-drain: every forward, then every backward (GPipe)
//   1f1b         one forward, one backward (PipeDream-flush): the same gradients, with at
//                most K - k micro-batches in flight on stage k instead of M
//   interleaved  1F1B over V cells per device placed round-robin (Megatron-LM): the bubble
//                shrinks by V
//   zb           zero-bubble ZB-H1: each backward split into B (input gradient, sent on at
//                once) and W (parameter gradients, deferred into the bubbles)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace brigade::pipeline {

enum class Op : uint8_t {
  RecvActivation,  // wait for micro-batch i's input from the previous cell
  Forward,         // run the cell's forward on micro-batch i
  SendActivation,  // hand micro-batch i's output to the next cell
  RecvGradient,    // wait for the gradient of micro-batch i's output from the next cell
  Recompute,       // re-materialize micro-batch i's activations from its saved input
  Backward,        // the cell's backward on micro-batch i (gradients accumulate); in a split
                   // schedule the input gradient only, and parameter gradients of layers
                   // that cannot split
  SendGradient,    // hand the gradient of micro-batch i's input to the previous cell
  WeightGradient,  // split schedules: the parameter gradients of micro-batch i ("W")
  Step,            // one synchronous optimizer step for the whole mini-batch
};

// True for the actions that run a cell's layers (Forward, Recompute, Backward, WeightGradient).
inline bool computes(Op op) {
  return op == Op::Forward || op == Op::Recompute || op == Op::Backward || op == Op::WeightGradient;
}

struct Action {
  Op op;
  uint32_t micro_batch = 0;  // unused by Step
  uint32_t cell = 0;         // which of the stage's cells (0 unless interleaved)
  bool operator==(const Action&) const = default;
};

enum class Remat : uint8_t { Never, Always, ExceptLast };
enum class ScheduleKind : uint8_t { GPipe, OneFOneB, Interleaved, ZeroBubble };

struct Schedule {
  ScheduleKind kind = ScheduleKind::GPipe;
  uint32_t stages = 0, micro_batches = 0;
  uint32_t virtual_stages = 1;  // cells per stage; cell v of stage k is the model's cell v*K + k
  bool training = true;  // every micro-batch goes forward and backward; else forward only
  bool split = false;    // backward split into Backward (B) and WeightGradient (W) actions
  std::vector<std::vector<Action>> actions;  // [stage] -> in order
  uint32_t cells() const { return stages * virtual_stages; }
  // The model's cell an action of stage k runs on.
  uint32_t cell_of(uint32_t k, const Action& a) const { return a.cell * stages + k; }
};

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::GPipe;
  uint32_t stages = 1, micro_batches = 1;
  uint32_t virtual_stages = 1;  // interleaved only
  Remat remat = Remat::Never;
};

// The training schedule; a combination a schedule cannot run (interleaved with M not a
// multiple of K, V < 2 or V > 1 elsewhere) is refused with one line saying what would work.
Schedule build(const ScheduleOptions& o);
Schedule gpipe(uint32_t stages, uint32_t micro_batches, Remat remat);
// Evaluation: the forwards of `training`'s order (its receives and sends), nothing else.
Schedule forward_only(const Schedule& training);
// `s` over its first `m` micro-batches: the others' actions left out, the order kept (an
// evaluation's last batch, shorter than the micro-batches planned).
Schedule first_micro_batches(const Schedule& s, uint32_t m);

// Short names: "F3", "B0", "W0", "R2", "sA1" (send activation), "rG1" (receive gradient),
// "S"; with cells, the cell follows a dot: "F3.1".
std::string to_string(const Action& a, bool cells = false);
// One line per stage: "stage 1: rA0 F0 sA0 ... S".
std::string to_string(const Schedule& s);
// The same without the receives and sends: "stage 1: F0 F1 B0 F2 B1 ... S".
std::string compute_string(const Schedule& s);

// Simulates the schedule with blocking receives, and sends that block while all `slots` of
// their link are taken (a slot is taken by the Forward or Backward that writes it and given
// back by the consumer's Forward or Backward that reads it, as the executor does). Returns ""
// when every stage finishes, else a description of the deadlock or of a mismatched
// send/receive.
std::string check(const Schedule& s, uint32_t slots);

// The schedule's time on cells whose forward takes forward[c] (backward twice that, split
// evenly into B and W; a recompute as long as a forward), transfers taking no time: the
// fraction of stage-time spent idle between the first action and the last (the bubble).
double simulated_bubble(const Schedule& s, const std::vector<double>& forward);
// The same with every cell equally fast.
double simulated_bubble(const Schedule& s);

// Which buffers each action uses. A micro-batch's kept input (and targets, on the last cell)
// lives from its Forward to its last backward action; a set of layer activations from the
// Forward or Recompute that writes it to the last backward action that reads it (a Forward
// that a Recompute will redo gives its set back at once); in a split schedule, what B keeps
// for W (the deferred gradients) from B to W. Slots are reused lowest first.
struct Slots {
  std::vector<std::vector<uint32_t>> input, set, deferred;  // [stage][action]: slot used, or kNone
  std::vector<uint32_t> inputs, sets, deferreds;            // [cell]: how many of each it needs
  static constexpr uint32_t kNone = UINT32_MAX;
};
Slots assign_slots(const Schedule& s);

Remat parse_remat(const std::string& text);  // "never" | "always" | "except-last"
const char* remat_name(Remat r);
ScheduleKind parse_schedule_kind(const std::string& text);  // "gpipe" | "1f1b" | "interleaved" | "zb"
const char* schedule_kind_name(ScheduleKind k);

}  // namespace brigade::pipeline
