// Profiling: how long each layer of a model takes, forward and backward, on one particular
// device, and (optionally) each kernel it dispatches. A pipeline over devices of different
// speeds balances the per-layer times, so a slower device gets fewer layers; `brigade bench
// profile` prints both, to show where a step's GPU time goes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model.h"
#include "ops/precision.h"
#include "vk/device.h"

namespace brigade::pipeline {

struct KernelTime {
  uint32_t layer = 0;  // the model's layer count for the loss, between forward and backward
  bool backward = false;  // a layer's backward pass (never the loss's)
  std::string kernel;  // the shader's name
  double seconds = 0;
  std::string work;  // what it computed, where its launcher says (a product's shape)
  double flops = 0;
  bool loss = false;  // the loss's own dispatches (its forward and gradient), between the two passes
  const char* pass() const { return loss ? "loss" : backward ? "backward" : "forward"; }
};

struct LayerProfile {
  std::vector<double> forward, backward;  // seconds per layer
  std::vector<KernelTime> kernels;        // every dispatch in recording order (when asked)
  std::vector<double> total() const;      // forward + backward per layer
};

// Times for a micro-batch of `rows` samples: medians over `reps` runs (after one warm-up
// run) of GPU timestamps taken between layers and, with `per_kernel`, after every dispatch.
// The whole model is put on the device for the measurement, its memory cap lifted meanwhile
// (and its peaks reset after). Every layer stores in `precision`, its conversions timed with it.
// With `training` false, the forward passes of evaluation alone, on a cell planned for them
// (CellLayout::training): the backward times are zero.
LayerProfile profile_model(vk::Device& device, const model::Model& m, uint32_t rows, uint32_t reps = 3,
                           bool per_kernel = false, ops::Precision precision = ops::Precision::Fp32,
                           bool training = true);

// Forward and backward seconds per layer, as the planner and the partitioner take them:
// profile_model of the model's stand-in (model::stand_in: a GPT of one block) where it has one,
// every layer given the times of the layer that stands for it. A GPT's profile so takes about
// the time of one block rather than of all of them.
LayerProfile profile_layer_times(vk::Device& device, const model::Model& m, uint32_t rows, uint32_t reps = 3,
                                 ops::Precision precision = ops::Precision::Fp32, bool training = true);

// Forward plus backward seconds per layer (the partitioner's input).
inline std::vector<double> profile_layers(vk::Device& device, const model::Model& m, uint32_t rows,
                                          ops::Precision precision = ops::Precision::Fp32, uint32_t reps = 3) {
  return profile_layer_times(device, m, rows, reps, precision).total();
}

}  // namespace brigade::pipeline
