// `--plan auto`: every pipeline flag the user leaves out chosen from measured speed and
// memory (pipeline/planner.h). Each device's layer times are profiled at every micro-batch
// size and precision the search may try, or read from the profile cache
// (pipeline/profile_cache.h); the rate of each boundary's link is measured; under mpirun
// every rank profiles its own device and all of them search the same gathered profiles, so
// every rank reaches the same plan.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model.h"
#include "pipeline_flags.h"

namespace brigade::cli {

struct AutoPlan {
  PipelineFlags flags;  // the choice: every pipeline flag fixed (--plan given)
  std::vector<std::vector<std::string>> table;  // the best configurations, a header row first
  std::string profiled;  // how the profiles were found: measured (and how long) or cached
  std::string line;      // the choice and its prediction, one line
  std::string same_as;   // the flags that build the same pipeline by hand
  nlohmann::json record; // the choice for metrics.jsonl and the checkpoint
  struct Row {           // every configuration that fits, fastest first (bench planner)
    PipelineFlags flags;
    double predicted_ms = 0;
    std::string text;    // "0,1 M8 1f1b never fp32"
    std::string same;    // equal for configurations that run the same (one stage: every schedule)
  };
  std::vector<Row> ranked;
  // The pool it chose from (--devices, else every device), an entry's physical device and
  // memory cap (0: none) each, and the entry each stage of the choice took: a re-plan after
  // a loss chooses again from the entries that remain (recovery.h).
  struct PoolEntry {
    uint32_t physical = 0;
    uint64_t cap = 0;
  };
  std::vector<PoolEntry> pool;
  std::vector<uint32_t> stage_entries;
};

// Searches the configurations `f` leaves open for mini-batches of `rows`; `top` rows in the
// table. Refuses (UserError, one line) constraints nothing satisfies.
AutoPlan auto_plan(const model::Model& m, const PipelineFlags& f, uint32_t rows, uint32_t optimizer_states,
                   size_t top = 8);

}  // namespace brigade::cli
