// What `bench kernels` and `bench products` share: the tilings worth comparing on a device,
// and the values their products run on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "ops/matmul.h"
#include "ops/precision.h"
#include "vk/physical.h"

namespace brigade::cli {

// n values in [-1, 1) from `seed`, the same on every run.
std::vector<float> random_values(size_t n, uint32_t seed);

// Values as stored: fp32, or packed two 16-bit values to a word.
std::vector<uint32_t> stored_words(const std::vector<float>& v, ops::Precision format);

// Tilings worth comparing on this device for A and B stored in `format`: the default (unset:
// the device's choice for each problem, matmul_tiling), then the fixed alternatives it was
// chosen over (docs/BENCHMARKS.md), the default's own full-size workgroup among them; for
// 16-bit formats the matrix units' blocks where the device lists the type, and two
// measurements of the default block (its feed other than Staged: C is not the product's).
std::vector<std::optional<ops::MatmulTiling>> candidate_tilings(const vk::PhysicalInfo& info, ops::Precision format);

}  // namespace brigade::cli
