#include "optim/lr_schedule.h"

#include <cmath>
#include <numbers>
#include <string>

#include "util/error.h"
#include "util/units.h"

namespace brigade::optim {

LrSchedule constant(double lr) {
  LrSchedule s;
  s.base_lr = lr;
  validate(s);
  return s;
}

LrSchedule warmup_cosine(double base_lr, double min_lr, uint64_t warmup_steps, uint64_t total_steps) {
  LrSchedule s{LrSchedule::Kind::WarmupCosine, base_lr, min_lr, warmup_steps, total_steps};
  validate(s);
  return s;
}

void validate(const LrSchedule& s) {
  if (!(s.base_lr > 0 && std::isfinite(s.base_lr)))
    throw UserError("`base_lr` " + format_number(s.base_lr) + " is not a learning rate; expected a number above 0");
  if (s.kind == LrSchedule::Kind::Constant) return;
  if (!(s.min_lr >= 0 && s.min_lr <= s.base_lr))
    throw UserError("`min_lr` " + format_number(s.min_lr) + " is not between 0 and `base_lr` " +
                    format_number(s.base_lr));
  if (s.total_steps == 0) throw UserError("a learning-rate schedule of 0 steps (`total_steps`)");
  if (s.warmup_steps > s.total_steps)
    throw UserError("`warmup_steps` " + std::to_string(s.warmup_steps) + " is more than the schedule's `total_steps` " +
                    std::to_string(s.total_steps));
}

double learning_rate(const LrSchedule& s, uint64_t step) {
  if (s.kind == LrSchedule::Kind::Constant) return s.base_lr;
  if (step < s.warmup_steps) return s.base_lr * double(step + 1) / double(s.warmup_steps);
  if (step >= s.total_steps) return s.min_lr;
  const double p = double(step - s.warmup_steps) / double(s.total_steps - s.warmup_steps);
  return s.min_lr + (s.base_lr - s.min_lr) * (1 + std::cos(std::numbers::pi * p)) / 2;
}

}  // namespace brigade::optim
