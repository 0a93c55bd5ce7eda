#include "pipeline/batch.h"

#include <random>

namespace brigade::pipeline {

Batch random_batch(const model::Model& m, uint32_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  Batch b;
  b.rows = rows;
  const uint64_t in = model::elements(m.input);
  std::uniform_int_distribution<int32_t> cls(0, int32_t(m.classes) - 1);
  if (m.token_input) {
    for (uint64_t i = 0; i < rows * in; ++i) b.tokens.push_back(cls(rng));
  } else {
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (uint64_t i = 0; i < rows * in; ++i) b.images.push_back(u(rng));
  }
  for (uint64_t i = 0; i < uint64_t(rows) * m.targets_per_sample; ++i) b.targets.push_back(cls(rng));
  return b;
}

}  // namespace brigade::pipeline
