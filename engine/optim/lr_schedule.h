// Learning-rate schedules: pure functions of the step number (0 for the first update).
//
// Constant:      lr(step) = base_lr.
// WarmupCosine:  linear warmup, then cosine decay from base_lr to min_lr, then min_lr:
//   step < warmup:           base_lr * (step + 1) / warmup
//   warmup <= step < total:  min_lr + (base_lr - min_lr) * (1 + cos(pi * p)) / 2,
//                            p = (step - warmup) / (total - warmup)
//   step >= total:           min_lr
// so the last warmup step reaches base_lr, the first decay step is base_lr, and the decay
// would reach min_lr exactly at step = total.
#pragma once

#include <cstdint>

namespace brigade::optim {

struct LrSchedule {
  enum class Kind { Constant, WarmupCosine };
  Kind kind = Kind::Constant;
  double base_lr = 1e-3;
  double min_lr = 0;          // WarmupCosine only
  uint64_t warmup_steps = 0;  // WarmupCosine only
  uint64_t total_steps = 0;   // WarmupCosine only: warmup plus decay
};

LrSchedule constant(double lr);
LrSchedule warmup_cosine(double base_lr, double min_lr, uint64_t warmup_steps, uint64_t total_steps);

// Throws UserError with one line naming the bad value.
void validate(const LrSchedule& s);

double learning_rate(const LrSchedule& s, uint64_t step);

}  // namespace brigade::optim
