// DIR/checkpoint.safetensors: everything a run needs to continue exactly where it stopped.
//   tensors  every parameter and buffer under its PyTorch name (F32); for each BatchNorm
//            layer "<prefix>.num_batches_tracked" (I64, the steps taken), as PyTorch keeps;
//            the optimizer's state as "optimizer.<parameter>.<key>" (F32), e.g.
//            "optimizer.0.weight.exp_avg".
//   metadata "format" = "brigade-checkpoint 1", "model", "step" (updates applied),
//            "config" (JSON: the model's TOML and every training setting), "rng" (JSON: the
//            seed; data order and dropout are pure functions of seed and step).
// PyTorch loads the parameters with load_state_dict after dropping the "optimizer." keys.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/model.h"
#include "optim/loss_scale.h"

namespace brigade::io {

struct Checkpoint {
  uint64_t step = 0;
  uint64_t seed = 0;
  std::string config;  // JSON text
  std::map<std::string, std::vector<float>> params;     // model params and buffers
  std::map<std::string, std::vector<float>> optimizer;  // "<parameter>.<key>" (no prefix)
  optim::LossScale loss_scale;  // metadata "loss_scale"; its initial state when a file has none
};

constexpr const char* kOptimizerPrefix = "optimizer.";

// Writes atomically (temporary file, fsync, rename): a crash leaves the old file or the new.
void write_checkpoint(const std::string& path, const model::Model& m, const Checkpoint& c);
// Reads and checks one: every parameter of `m` with its shape, the step, the config. With
// `bytes`, the file's contents already read (by another rank), `path` naming them.
Checkpoint read_checkpoint(const std::string& path, const model::Model& m,
                           const std::vector<uint8_t>* bytes = nullptr);
// Just the metadata's config JSON (to rebuild the model before reading the rest).
std::string checkpoint_config(const std::string& path, const std::vector<uint8_t>* bytes = nullptr);
// The step a checkpoint was written after (its metadata's "step").
uint64_t checkpoint_step(const std::string& path);

}  // namespace brigade::io
