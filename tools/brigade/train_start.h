// `brigade train`'s start: its flags, and what a run trains with, read and checked before any
// device opens: the settings (a resumed run's from its checkpoint, else the flags and the
// model's defaults), the model, the data and the checkpoint resumed.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/checkpoint.h"
#include "io/data.h"
#include "model/model.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "pipeline_flags.h"
#include "train.h"

namespace brigade::cli {

struct TrainArgs {
  std::string model, data, out;
  std::vector<std::string> set;
  Settings s;
  uint64_t epochs = 0;
  uint64_t stop_after = 0;
  uint64_t log_every = 0;
  bool resume = false;
  std::string on_device_loss = "continue";
  uint64_t snapshot_every = 0;  // 0: as often as costs under 2 % of a step
  PipelineFlags pipeline;
  CLI::App* cmd = nullptr;
};

bool given(const TrainArgs& a, const char* flag);
// Whether the model's numbers depend on how the mini-batch is cut into micro-batches
// (BatchNorm's statistics are each micro-batch's): a resumed or re-planned run keeps its count.
bool statistics_per_micro_batch(const model::Model& m);
// The optimizer the settings name; refuses options it does not take.
std::unique_ptr<optim::Optimizer> make_optimizer(const Settings& s);

struct RunStart {
  model::Model m;
  std::unique_ptr<io::Dataset> data;
  std::optional<io::Checkpoint> resumed;
  nlohmann::json saved_plan;   // the plan the resumed run ran with, where --plan auto chose it
  bool recorded_plan = false;  // the pipeline flags are that plan's
  optim::LrSchedule schedule;
};
// Fills a.s (resumed: from the checkpoint at `ckpt`, whose bytes under mpirun are rank 0's
// `from`; a.pipeline then takes its recorded plan and precision) and reads what the run
// trains with.
RunStart start_run(TrainArgs& a, const std::string& ckpt, const std::vector<uint8_t>* from);

}  // namespace brigade::cli
