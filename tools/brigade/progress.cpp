#include "progress.h"

#include <cmath>
#include <cstdio>

#include "pipeline/relay.h"

namespace brigade::cli {

std::string format_fixed(double v, int decimals) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

std::string format_duration(double seconds) {
  char b[32];
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  if (seconds < 10) std::snprintf(b, sizeof b, "%.1fs", seconds);
  else if (seconds < 60) std::snprintf(b, sizeof b, "%.0fs", seconds);
  else if (seconds < 3600) std::snprintf(b, sizeof b, "%dm%02ds", int(seconds) / 60, int(seconds) % 60);
  else std::snprintf(b, sizeof b, "%dh%02dm", int(seconds) / 3600, int(seconds) % 3600 / 60);
  return b;
}

Progress::Progress(uint64_t total, std::string unit, bool live, uint64_t log_every)
    : total_(total), log_every_(log_every ? log_every : std::max<uint64_t>(1, total / 40)),
      unit_(std::move(unit)), live_(live), start_us_(pipeline::now_us()) {}

double Progress::elapsed() const { return (pipeline::now_us() - start_us_) / 1e6; }

void Progress::step(uint64_t step, double loss, uint64_t count, double seconds,
                    const std::vector<double>& busy) {
  step_ = step;
  loss_sum_ += loss, ++losses_, count_ += double(count), seconds_ += seconds;
  // Exponential averages from the second step on: the first compiles the kernels' pipelines
  // (a run's first step often takes ten times a later one), so the second's replace its figures.
  const double a = seen_++ < 2 ? 1.0 : 0.1;
  rate_ = (1 - a) * rate_ + a * (double(count) / seconds);
  step_seconds_ = (1 - a) * step_seconds_ + a * seconds;
  if (busy_.size() != busy.size()) busy_ = busy;
  for (size_t k = 0; k < busy.size(); ++k) busy_[k] = (1 - a) * busy_[k] + a * busy[k];
  const double now = pipeline::now_us();
  if (live_) {
    if (now - last_draw_us_ < 250e3 && step != total_) return;
    std::printf("\r\033[K%s", status().c_str());
    std::fflush(stdout);
    drawn_ = true;
    last_draw_us_ = now;
  } else {
    if (step % log_every_ != 0 && step != total_) return;
    std::printf("%s\n", status().c_str());
    std::fflush(stdout);
  }
  loss_sum_ = 0, losses_ = 0, count_ = 0, seconds_ = 0;
}

std::string Progress::status() const {
  const double loss = losses_ ? loss_sum_ / double(losses_) : NAN;
  std::string s = "step " + std::to_string(step_) + "/" + std::to_string(total_) + "  loss " +
                  format_fixed(loss, 4) + "  " + format_fixed(rate_, 0) + " " + unit_ + "/s  elapsed " +
                  format_duration(elapsed()) + "  ETA " +
                  format_duration(double(total_ - step_) * step_seconds_);
  if (!busy_.empty()) {
    s += "  busy";
    for (double b : busy_) s += " " + format_fixed(100 * b, 0) + "%";
  }
  return s;
}

void Progress::clear_live() {
  if (live_ && drawn_) std::printf("\r\033[K");
  drawn_ = false;
}

void Progress::print(const std::string& line) {
  clear_live();
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void Progress::finish() {
  if (live_ && drawn_) std::printf("\n");
  drawn_ = false;
  std::fflush(stdout);
}

}  // namespace brigade::cli
