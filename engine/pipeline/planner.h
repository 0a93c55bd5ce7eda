// The search behind `--plan auto`: over the devices it may use (which, how many, in which
// order), the micro-batches, the schedule, re-materialization and each stage's precision,
// every configuration is planned with the plan's own memory model (plan.h) and cut by each
// layer's measured time on each device; those over a device's memory are pruned, the rest
// ranked by predicted step time: the schedule's actions simulated in order on the measured
// layer times, each boundary's transfer at its link's measured rate, stages on one compute
// resource taking turns (simulate.h). Pure: the profiles and link rates come in measured.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/model.h"
#include "ops/precision.h"
#include "pipeline/partition.h"
#include "pipeline/schedule.h"

namespace brigade::pipeline {

// Seconds per layer of one micro-batch, forward and backward, measured on one device.
struct LayerTimes {
  std::vector<double> forward, backward;
};

// A device the planner may give stages to.
struct PlanDevice {
  StageSpec spec;          // its memory cap, name, physical device, heap, stores_half
  // Its model and driver ("NVIDIA H200, NVIDIA 580.159.04"); empty: known by `spec.physical`
  // alone. Entries of one model under the same caps, sharing compute alike, are
  // interchangeable: the search takes them in pool order only.
  std::string model;
  uint32_t resource = 0;   // stages whose devices share a resource run one action at a time
  // The precisions a stage on it may store in, the preferred first (ties go to it).
  std::vector<ops::Precision> precisions;
  ops::Precision multiplies = ops::Precision::Fp32;  // what `auto` takes on it (ops::auto_precision)
  // Measured by (micro-batch rows, precision): every pair the search may ask for.
  std::map<std::pair<uint32_t, ops::Precision>, LayerTimes> times;
};

struct ScheduleChoice {
  ScheduleKind kind = ScheduleKind::GPipe;
  uint32_t virtual_stages = 1;
  bool operator==(const ScheduleChoice&) const = default;
};

// Boundaries between pool entries: seconds per byte of a transfer from entry i to entry j
// (empty: free), and why a boundary from i to j cannot be (empty, or "" for each pair that can).
struct Links {
  std::vector<std::vector<double>> seconds_per_byte;
  std::vector<std::vector<std::string>> unlinkable;
};

// What to search. Each axis lists its candidates; an axis the user fixed holds one.
struct SearchSpace {
  uint32_t rows = 1;              // mini-batch N
  uint32_t optimizer_states = 0;
  // False: configurations of forward passes only (PlanOptions::training), cut and ranked by
  // their forward times.
  bool training = true;
  std::vector<PlanDevice> pool;
  Links links;
  std::vector<std::vector<uint32_t>> device_orders;  // pool indices, one per stage
  std::vector<uint32_t> micro_batches;
  std::vector<ScheduleChoice> schedules;
  std::vector<Remat> remats;
  // Fixed: one for all or one per stage (nullopt: the stage's device's `multiplies`); empty:
  // searched.
  std::vector<std::optional<ops::Precision>> precision;
  std::vector<uint32_t> balance;          // fixed layers per cell; empty: cut by measured time
  // 16 bits change a run's numbers: a configuration storing any stage in 16 bits ranks as if
  // this fraction slower, so fp32 stays where 16 bits would be faster only by the noise of a
  // profile.
  double sixteen_bit_margin = 0.05;
  // Stop at the first configuration that fits: only whether any does is wanted.
  bool first_fit = false;
};

struct Candidate {
  std::vector<uint32_t> devices;  // pool indices, one per stage
  uint32_t micro_batches = 1;
  ScheduleChoice schedule;
  Remat remat = Remat::Never;
  std::vector<ops::Precision> precision;  // per stage
  std::vector<uint32_t> balance;          // layers per cell
  double step_seconds = 0;                // predicted, one mini-batch's forwards and backwards
  double bubble = 0;
  std::vector<uint64_t> peak;             // predicted bytes per stage
};

struct SearchResult {
  std::vector<Candidate> ranked;  // the configurations that fit, fastest first (16 bits' margin counted)
  size_t considered = 0;          // configurations planned
  size_t over_memory = 0;         // pruned: over a cap or a device's memory
  size_t invalid = 0;             // combinations a schedule or the model refuses
  std::string refused;            // why the refused combination of the most stages was refused
  std::string closest;            // none fits: why the one nearest its caps does not
};

SearchResult search(const model::Model& m, const SearchSpace& space);

// Every ordered choice of distinct pool entries, 1 to `max_stages` long, leaving out orders
// that differ from one before only by interchangeable entries (PlanDevice::model): the same
// physical device, or another of its model, under the same caps, linked to the others alike.
// Entries of one device under other caps are other choices.
// GPUs of one model report memory budgets a little apart (what other programs hold on each,
// VK_EXT_memory_budget): those within a tenth of each other are planned against the smallest,
// so that the search takes them as one model (device_orders) rather than trying each order.
void align_budgets(std::vector<PlanDevice>& pool);

std::vector<std::vector<uint32_t>> device_orders(const std::vector<PlanDevice>& pool, uint32_t max_stages,
                                                 const Links& links = {});
// The divisors of n, ascending.
std::vector<uint32_t> divisors(uint32_t n);
// The schedules worth trying: gpipe, 1f1b, zb, and interleaved with V of 2 and 4.
std::vector<ScheduleChoice> all_schedules();

}  // namespace brigade::pipeline
