// Profiling for the partitioner: how long each layer of a model takes, forward plus
// backward, on one particular device. A pipeline over devices of different speeds balances
// these per-device times, so a slower device gets fewer layers.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"
#include "vk/device.h"

namespace brigade::pipeline {

// Seconds per layer for a micro-batch of `rows` samples: the median over `reps` runs (after
// one warm-up run) of GPU timestamps taken between layers. The whole model is put on the
// device for the measurement.
std::vector<double> profile_layers(vk::Device& device, const model::Model& m, uint32_t rows,
                                   uint32_t reps = 3);

}  // namespace brigade::pipeline
