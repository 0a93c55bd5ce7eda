// When `brigade train` takes its next snapshot (recovery.h): every `every` steps, or (0) as
// often as costs at most `budget` of a step's time, measured: the last capture's seconds over
// budget x a step's seconds. A step's seconds are the lower median of the last 15 steps: the
// first step, which compiles the pipelines (3 s against 3.4 ms for gpt-mini on an H200 with
// a cold shader cache), and any other slow step leave the interval alone.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

namespace brigade::cli {

class SnapshotPolicy {
 public:
  explicit SnapshotPolicy(uint64_t every, double budget = 0.02) : every_(every), budget_(budget) {}
  // After a step that took `seconds`, `since` steps after the last snapshot.
  bool due(uint64_t since, double seconds) {
    recent_[steps_++ % recent_.size()] = seconds;
    return since >= interval();
  }
  void captured(double seconds) { capture_seconds_ = seconds; }
  // The interval now in force, in steps.
  uint64_t interval() const {
    if (every_) return every_;
    const double step = step_seconds();
    if (step <= 0 || capture_seconds_ <= 0) return 1;
    return std::max<uint64_t>(1, uint64_t(std::ceil(capture_seconds_ / (budget_ * step))));
  }

 private:
  double step_seconds() const {
    const size_t n = std::min<uint64_t>(steps_, recent_.size());
    if (n == 0) return 0;
    std::array<double, 15> s = recent_;
    std::nth_element(s.begin(), s.begin() + (n - 1) / 2, s.begin() + n);
    return s[(n - 1) / 2];
  }

  uint64_t every_;
  double budget_;
  double capture_seconds_ = 0;  // the last capture's
  std::array<double, 15> recent_{};  // the last steps' seconds, a ring
  uint64_t steps_ = 0;
};

}  // namespace brigade::cli
