// Summaries of repeated measurements, for the benchmarks and the partitioner's profile.
#pragma once

#include <algorithm>
#include <vector>

namespace brigade {

// The median of `v` (the mean of the middle two for an even count); `v` must not be empty.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace brigade
