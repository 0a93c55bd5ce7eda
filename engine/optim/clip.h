// Global gradient-norm clipping, torch.nn.utils.clip_grad_norm_ with norm type 2, split so
// that pipeline stages on different devices can combine:
//   each stage:  squared = GradNorm(dev, its gradients): record(cmd), run, squared()
//   host:        Clip c = clip(sum of every stage's squared, max_norm)
//   each stage:  optimizer step with Step::grad_scale = c.grad_scale (no extra pass; the
//                gradient buffers keep their unclipped values), or
//                scale(cmd, grad, n, c.grad_scale) to clip the gradients themselves.
#pragma once

#include <cstdint>
#include <vector>

#include "vk/buffer.h"
#include "vk/commands.h"

namespace brigade::optim {

struct Clip {
  double total_norm = 0;  // sqrt of the summed squares over every gradient
  double grad_scale = 1;  // min(1, max_norm / (total_norm + 1e-6))
};

// clip_grad_norm_'s arithmetic on the sum of squares of every gradient of every stage.
// Clipping happens (grad_scale < 1) only when total_norm + 1e-6 > max_norm. As in torch, a
// NaN norm gives a NaN scale and an infinite one a zero scale: callers that want to skip
// such steps check total_norm. Throws UserError unless max_norm > 0.
Clip clip(double squared_sum, double max_norm);

// Partial sums grad_norm_partial writes for a tensor of n floats.
uint32_t grad_norm_groups(uint32_t n);
// The memory GradNorm holds for a tensor of n floats: its partial sums and their table.
uint64_t grad_norm_bytes(uint32_t n);

// Records x *= alpha.  x: (n)
void scale(vk::Commands& cmd, vk::View x, uint32_t n, float alpha);

// The squared L2 norm of one device's gradient tensors. The GPU reduces each tensor to
// per-workgroup partial sums; the host adds them in double, in a fixed order, so the result
// is deterministic. Tensors that lie in one buffer (parts of an arena, vk::Buffer::whole)
// are reduced by one dispatch a window of the buffer (as wide as the device's
// maxStorageBufferRange binds), each workgroup told by a table which tensor it sums and
// where the tensor starts in the window; the partial sums are in host-visible memory, read
// without a staging copy.
class GradNorm {
 public:
  GradNorm(vk::Device& device, const std::vector<vk::View>& grads);
  // Records the reductions; the gradients must be complete when cmd runs.
  void record(vk::Commands& cmd) const;
  // Records the same reductions over `to`, a buffer laid out as `from`, the one buffer the
  // tensors lie in (a cell's parameter arena for its gradient arena): squared() then gives the
  // sums of to's tensors, through the same tables and partial sums.
  void record(vk::Commands& cmd, const vk::Buffer& from, const vk::Buffer& to) const;
  // Sum over the tensors of sum grad^2, once the recorded commands have completed; with
  // `each`, also every tensor's own sum, in the order of the constructor's list.
  double squared(std::vector<double>* each = nullptr) const;

 private:
  // One dispatch: the tensors of one window of a buffer, in the constructor's order.
  struct Run {
    vk::View window;
    vk::Buffer table, partials;
    std::vector<uint32_t> groups;  // per tensor
  };
  void dispatch(vk::Commands& cmd, const Run& run, vk::View window) const;
  std::vector<Run> runs_;
  uint32_t width_ = 0;  // the reduction's workgroup width
};

}  // namespace brigade::optim
