// Training progress for people: on a terminal one live line (step/total, loss, throughput,
// ETA, per-stage busy share) redrawn a few times a second; otherwise a plain log line every
// few steps, so a log file reads well.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace brigade::cli {

std::string format_fixed(double v, int decimals);  // "0.4123"
std::string format_duration(double seconds);       // "0.8s", "42s", "5m12s", "2h03m"

class Progress {
 public:
  // `unit` is what throughput counts ("samples", "tokens"); log_every 0 = about 40 lines.
  Progress(uint64_t total, std::string unit, bool live, uint64_t log_every);
  // After step `step` (1-based) took `seconds` for `count` units; busy = per-stage share.
  void step(uint64_t step, double loss, uint64_t count, double seconds, const std::vector<double>& busy);
  void print(const std::string& line);  // a line of its own (evaluations, notices)
  void finish();
  double elapsed() const;  // seconds since construction

 private:
  std::string status() const;
  void clear_live();

  uint64_t total_, log_every_;
  std::string unit_;
  bool live_;
  double start_us_, last_draw_us_ = 0;
  bool drawn_ = false;
  uint64_t step_ = 0;
  // Since the last log line or redraw: losses, units and seconds.
  double loss_sum_ = 0, count_ = 0, seconds_ = 0;
  uint64_t losses_ = 0;
  double rate_ = 0, step_seconds_ = 0;  // smoothed units/s and s/step
  uint64_t seen_ = 0;                   // steps of this run so far
  std::vector<double> busy_;
};

}  // namespace brigade::cli
