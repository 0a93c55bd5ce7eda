// The tilings worth trying for a matrix product on a device: what `bench kernels` and
// `bench products` time, and what a tuned tiling (ops/tuned_tilings.h) must be one of.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ops/matmul.h"
#include "ops/precision.h"
#include "ops/product_capture.h"
#include "vk/physical.h"

namespace brigade::ops {

// Tilings worth comparing on this device for A and B stored in `format`: the default (unset:
// the device's choice for each problem, matmul_tiling), then the fixed alternatives it was
// chosen over (docs/BENCHMARKS.md), the default's own full-size workgroup among them; for
// 16-bit formats the matrix units' blocks where the device lists the type, and two
// measurements of the default block (its feed other than Staged: C is not the product's).
std::vector<std::optional<MatmulTiling>> candidate_tilings(const vk::PhysicalInfo& info, Precision format);

// The tilings to try for one product beside `chosen` (its default): the device's candidates
// that compute it (staged as the product is, matrix units only on 16-bit A and B of one
// type), and where the product can split within `workspace` bytes, `chosen`'s block with K
// in 1 to 16 parts.
std::vector<MatmulTiling> product_candidates(const vk::PhysicalInfo& info, const CapturedProduct& c,
                                             const MatmulTiling& chosen, uint64_t workspace);

}  // namespace brigade::ops
