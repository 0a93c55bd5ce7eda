// Dynamic loss scaling for fp16 storage, as PyTorch's GradScaler does it: the backward starts
// from the loss times `scale`, so that small gradients stored in fp16 do not flush to zero;
// the update divides it out again. A step whose gradients are not finite (the scale was too
// large) updates nothing and halves the scale; after `kInterval` good steps in a row the
// scale doubles. The state is part of a checkpoint, so a resumed run scales as the
// uninterrupted one does.
#pragma once

#include <cstdint>

namespace brigade::optim {

struct LossScale {
  static constexpr double kInitial = 65536;  // 2^16, GradScaler's init_scale
  static constexpr uint64_t kInterval = 2000;  // GradScaler's growth_interval
  // The least scale a step is skipped at (GradScaler has none): at 2^-24, fp16's smallest
  // step, gradients that still overflow are not the scale's doing, and the run stops.
  static constexpr double kMinimum = 0x1p-24;

  double scale = kInitial;
  uint64_t good_steps = 0;     // since the last change of scale
  uint64_t skipped_steps = 0;  // in the whole run: steps that updated nothing

  // After a step: `skipped` when its gradients were not finite.
  void update(bool skipped) {
    if (skipped) {
      scale *= 0.5, good_steps = 0, ++skipped_steps;
    } else if (++good_steps == kInterval) {
      scale *= 2.0, good_steps = 0;
    }
  }
};

}  // namespace brigade::optim
