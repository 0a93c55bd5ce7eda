// What `brigade train` runs with, besides the pipeline: the model, the data, the optimizer
// and its schedule, and when to evaluate and checkpoint. Saved as JSON in every checkpoint,
// so a resumed run continues with exactly the settings it started with.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model.h"
#include "pipeline_flags.h"

namespace brigade::cli {

struct Settings {
  std::string model;       // preset name or file it came from
  std::string model_toml;  // the model's TOML, overrides applied
  std::string data;        // dataset path ("" = the default for the model)
  std::string data_checksum;  // io::Dataset::checksum of what it trains on; "" in checkpoints before it
  uint64_t seed = 0;
  uint32_t batch_size = 0;
  uint64_t steps = 0;  // total optimizer steps (--steps given with --resume extends a run)
  // The steps the cosine decays over: those the run started with (an extended run's later
  // steps take min_lr); 0 in checkpoints written before it was kept, read as `steps`.
  uint64_t decay_steps = 0;
  std::string optimizer = "adamw";
  double lr = 1e-3, min_lr = 0, weight_decay = 0, momentum = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  std::string schedule = "cosine";  // constant | cosine (linear warmup, cosine decay)
  uint64_t warmup = 0;
  double clip = 0;          // global gradient-norm clipping; 0 = off
  uint64_t eval_every = 0;  // steps between evaluations (and checkpoints)
  uint32_t eval_batches = 0;  // evaluation batches per evaluation; 0 = the whole split
  // --precision as the run trained in it (the pipeline flags given by hand): a resumed run
  // keeps it unless given another, for it changes the numbers, where the other pipeline flags
  // do not. "" in checkpoints written before it was kept.
  std::string precision;
  // The micro-batches the run trained in, by hand or by its plan: a resumed run of a model whose
  // numbers depend on them (BatchNorm's statistics are each micro-batch's) keeps them unless
  // given others. 0 in checkpoints written before they were kept.
  uint32_t micro_batches = 0;
  // --plan auto's choice (AutoPlan::record["flags"]): a resumed run trains with it unless
  // its command line sets the pipeline itself. Null when the flags were given by hand.
  nlohmann::json plan;
  // Each re-plan after a lost device (recovery.h): {step, lost devices, flags}, in order.
  nlohmann::json plan_history = nlohmann::json::array();
};

nlohmann::json to_json(const Settings& s);
// The flags of the settings the checkpoint holds: a resumed run refuses them, but --data
// (where the data lives now) and --steps or --epochs (a later total, which extends the run).
const std::vector<std::string>& setting_flags();
Settings settings_from_json(const nlohmann::json& j, const std::string& source);
// The precision the run trained in: its plan's where --plan auto chose it, else --precision
// as given; "" in checkpoints written before the settings kept it.
std::string trained_precision(const Settings& s);
// The plan a checkpoint (`source`) recorded (Settings::plan, AutoPlan::record["flags"]) applied
// to `f`: what a resumed run trains with. Each flag is held to what it takes, as the settings are.
PipelineFlags recorded_flags(const PipelineFlags& f, const nlohmann::json& plan, const std::string& source);

}  // namespace brigade::cli
