#include "ops/cross_entropy.h"

#include <string>

#include "shaders/loss.h"
#include "ops/launch_geometry.h"
#include "util/error.h"

namespace brigade::ops {
void cross_entropy_forward(vk::Commands& cmd, vk::View logits, vk::View targets, vk::View rows,
                           vk::View loss, uint32_t N, uint32_t V, uint32_t N_total) {
  // The caller (the schedule) passes the mini-batch size: a broken invariant, not user input.
  BRIGADE_EXPECT(N_total != 0 && N_total >= N, "cross-entropy over " + std::to_string(N) +
                                                   " rows of a mini-batch of " + std::to_string(N_total));
  if (N == 0) return;
  vk::Device& dev = cmd.device();
  const shaders::CrossEntropyPush push{N, V, N_total};
  cmd.dispatch(dev.kernel("cross_entropy_forward", reduction_spec(dev, V)), {logits, rows},
               push, row_groups(dev, N));
  // One workgroup sums the rows in a fixed order: deterministic, no float atomics.
  cmd.dispatch(dev.kernel("cross_entropy_loss", reduction_spec(dev, N)),
               {logits, targets, rows, loss}, push, {1});
}

void cross_entropy_backward(vk::Commands& cmd, vk::View logits, vk::View targets,
                            vk::View rows, vk::View dlogits, uint32_t N, uint32_t V,
                            uint32_t N_total) {
  // The caller (the schedule) passes the mini-batch size: a broken invariant, not user input.
  BRIGADE_EXPECT(N_total != 0 && N_total >= N, "cross-entropy over " + std::to_string(N) +
                                                   " rows of a mini-batch of " + std::to_string(N_total));
  if (uint64_t(N) * V == 0) return;
  const bool vec4 = quads(V, {logits, dlogits});
  const uint32_t per_row = vec4 ? V / 4 : V;
  cmd.dispatch(cmd.device().kernel("cross_entropy_backward", vk::Specialization().set(0, vec4)),
               {logits, targets, rows, dlogits}, shaders::CrossEntropyPush{N, V, N_total},
               {capped_groups(per_row, BRIGADE_WG_LOSS_ROW).x, row_groups(cmd.device(), N).x});
}

void cross_entropy_accuracy(vk::Commands& cmd, vk::View logits, vk::View targets,
                            vk::View correct, uint32_t N, uint32_t V) {
  if (N == 0) return;
  vk::Device& dev = cmd.device();
  cmd.dispatch(dev.kernel("cross_entropy_accuracy", reduction_spec(dev, V)),
               {logits, targets, correct}, shaders::CrossEntropyPush{N, V, N}, capped_groups(N, 1));
}

void cross_entropy_evaluate(vk::Commands& cmd, vk::View logits, vk::View targets, vk::View rows,
                            vk::View loss, vk::View correct, uint32_t N, uint32_t V,
                            uint32_t N_total) {
  cross_entropy_forward(cmd, logits, targets, rows, loss, N, V, N_total);
  cross_entropy_accuracy(cmd, logits, targets, correct, N, V);
}

}  // namespace brigade::ops
