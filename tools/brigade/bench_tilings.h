// What `bench kernels`, `bench products` and `bench attention` share: the values their kernels
// run on, and how tilings are timed in turn (the tilings they compare: ops/matmul_candidates.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ops/precision.h"
#include "vk/commands.h"

namespace brigade::cli {

// A bench command's --precision on `info`: fp32, bf16, fp16, or auto (what `train --precision
// auto` stores a stage in there, ops::auto_precision).
ops::Precision bench_precision(const std::string& text, const vk::PhysicalInfo& info);

// n values in [-1, 1) from `seed`, the same on every run.
std::vector<float> random_values(size_t n, uint32_t seed);

// Values as stored: fp32, or packed two 16-bit values to a word.
std::vector<uint32_t> stored_words(const std::vector<float>& v, ops::Precision format);

// The median GPU time of each of `parts` parts of each of `runs` things timed in turn (the
// tilings of one kernel): `reps` rounds, each recording every run's parts in order with a
// timestamp around each part, one submission a round; on a GPU after such rounds untimed until
// they run no faster (a second at least), so that it runs at its working clock after the
// host's checks. record(cmd, run, part) records one part.
// Alternated, a change in the device's speed falls on all of them alike.
std::vector<std::vector<double>> alternated_ms(vk::Commands& cmd, size_t runs, size_t parts, int reps,
                                               const std::function<void(vk::Commands&, size_t, size_t)>& record);

}  // namespace brigade::cli
