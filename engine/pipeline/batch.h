// One mini-batch on the host, as the executor takes it.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"

namespace brigade::pipeline {

struct Batch {
  uint32_t rows = 0;
  std::vector<float> images;     // rows x elements(model.input), when the model takes floats
  std::vector<int32_t> tokens;   // rows x elements(model.input), when it takes token ids
  std::vector<int32_t> targets;  // rows x model.targets_per_sample, each in [0, classes)
};

// A mini-batch of `rows` random samples for `m` (seeded mt19937): pixels uniform in [0, 1)
// or token ids, and targets, uniform over the classes. Tests and benchmarks run on it.
Batch random_batch(const model::Model& m, uint32_t rows, uint32_t seed);

}  // namespace brigade::pipeline
