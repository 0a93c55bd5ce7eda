// What `bench kernels` and `bench products` share: the values their products run on (the
// tilings they compare: ops/matmul_candidates.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ops/precision.h"

namespace brigade::cli {

// n values in [-1, 1) from `seed`, the same on every run.
std::vector<float> random_values(size_t n, uint32_t seed);

// Values as stored: fp32, or packed two 16-bit values to a word.
std::vector<uint32_t> stored_words(const std::vector<float>& v, ops::Precision format);

}  // namespace brigade::cli
