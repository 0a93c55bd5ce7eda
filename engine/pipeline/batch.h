// One mini-batch on the host, as the executor takes it.
#pragma once

#include <cstdint>
#include <vector>

namespace brigade::pipeline {

struct Batch {
  uint32_t rows = 0;
  std::vector<float> images;     // rows x elements(model.input), when the model takes floats
  std::vector<int32_t> tokens;   // rows x elements(model.input), when it takes token ids
  std::vector<int32_t> targets;  // rows x model.targets_per_sample, each in [0, classes)
};

}  // namespace brigade::pipeline
