// What `brigade train` keeps so that a lost device does not end the run: a host copy of every
// stage's parameters, optimizer state and loss scale (a Snapshot), refreshed every few steps;
// and, when a device is lost, which stages went with it and the flags that re-plan the
// pipeline on the devices that remain (--plan auto's search, the user's fixed flags kept).
// The run then rebuilds the pipeline, restores the snapshot and replays the steps since it
// in the same data order (train.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "optim/optimizer.h"
#include "pipeline/executor.h"
#include "auto_plan.h"
#include "pipeline_flags.h"
#include "snapshot_policy.h"
#include "train.h"

namespace brigade::cli {

// This process's stages' parameters and optimizer state as of `step`, on the host: a
// "capture" action of each of the pipeline's devices (vk::Device::begin_action).
io::Checkpoint capture(const model::Model& m, uint64_t step, const Pipeline& p, const optim::Optimizer& opt,
                       const optim::LossScale& scaler);
// Puts a capture (or a read checkpoint) back into the pipeline's parameters and optimizer
// state; `source` names it in the refusal of a missing optimizer state.
void restore(const io::Checkpoint& c, pipeline::Executor& ex, optim::Optimizer& opt, const std::string& source);
// Writes `c` with the settings as the run's checkpoint; under mpirun every rank gives its
// part and rank 0 writes the one file.
void save(const std::string& path, const model::Model& m, const Settings& s, io::Checkpoint c);

// The stages whose devices are lost (vk::Device::lost), in stage order.
std::vector<uint32_t> lost_stages(const Pipeline& p);
// The flags that re-plan after the stages `lost` of the pipeline that ran with `run` went:
// --plan auto, every flag `user` gave kept fixed except the cut (--balance, --partition), and
// the run's precision kept. Where `plan` (the run's, if --plan auto chose it) and the run
// kept one precision for all stages, it chooses from that plan's pool less the entries the
// lost stages took, each entry with its cap; else from the entries of run.devices that
// remain, per-stage lists (--precision, --mem-limit) without the lost stages' entries.
// An interleaved schedule `user` fixed that the devices remaining cannot run (one device, or
// a given --micro-batches no count of them divides) becomes 1f1b. Empty devices when none
// remains.
PipelineFlags replan_flags(const PipelineFlags& user, const PipelineFlags& run, const std::vector<uint32_t>& lost,
                           const AutoPlan* plan = nullptr);

}  // namespace brigade::cli
