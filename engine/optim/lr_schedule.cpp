#include "optim/lr_schedule.h"

#include <cmath>
#include <numbers>
#include <string>

#include "util/error.h"

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
    throw UserError("learning rate: base lr is " + std::to_string(s.base_lr) +
                    ", expected a positive number");
  if (s.kind == LrSchedule::Kind::Constant) return;
  if (!(s.min_lr >= 0 && s.min_lr <= s.base_lr))
    throw UserError("learning rate: min lr is " + std::to_string(s.min_lr) +
                    ", expected between 0 and the base lr " + std::to_string(s.base_lr));
  if (s.total_steps == 0 || s.warmup_steps > s.total_steps)
    throw UserError("learning rate: warmup " + std::to_string(s.warmup_steps) + " and total " +
                    std::to_string(s.total_steps) +
                    " steps, expected total > 0 and warmup <= total");
}

double learning_rate(const LrSchedule& s, uint64_t step) {
  if (s.kind == LrSchedule::Kind::Constant) return s.base_lr;
  if (step < s.warmup_steps) return s.base_lr * double(step + 1) / double(s.warmup_steps);
  if (step >= s.total_steps) return s.min_lr;
  const double p = double(step - s.warmup_steps) / double(s.total_steps - s.warmup_steps);
  return s.min_lr + (s.base_lr - s.min_lr) * (1 + std::cos(std::numbers::pi * p)) / 2;
}

}  // namespace brigade::optim
