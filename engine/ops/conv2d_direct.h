// The direct Conv2d kernels (shaders/conv2d_forward.comp, conv2d_backward_data.comp,
// conv2d_backward_weight.comp): each invocation computes a register tile of outputs straight
// from x, weight and dy, with no scratch. ops/conv2d.h runs them on the devices where they
// measured faster than the matrix form (form_for), and the helpers here serve both.
#pragma once

#include <optional>
#include <string>

#include "ops/conv2d.h"
#include "util/error.h"

namespace brigade::ops::direct {

inline void require_groups(vk::Groups g, const char* pass) {
  constexpr uint32_t kMax = 65535;  // maxComputeWorkGroupCount every device guarantees
  if (g.x > kMax || g.y > kMax || g.z > kMax)
    throw UserError(std::string("conv2d ") + pass + ": the tensor is too large for one dispatch (" +
                    std::to_string(g.x) + " x " + std::to_string(g.y) + " x " +
                    std::to_string(g.z) + " workgroups); use smaller micro-batches");
}

inline shaders::Conv2dPush push_of(const Conv2dShape& s) {
  return {s.n, s.ic, s.h, s.w, s.oc, s.kh, s.kw, s.out_h(), s.out_w(),
          s.stride_h, s.stride_w, s.pad_h, s.pad_w};
}

// The three passes; the shapes and views are checked by the caller. The bias gradient is the
// caller's too (conv2d_backward_bias serves both forms).
void forward(vk::Commands& cmd, vk::View x, vk::View weight, std::optional<vk::View> bias,
             vk::View y, const Conv2dShape& s);
void backward_data(vk::Commands& cmd, vk::View dy, vk::View weight, vk::View dx,
                   const Conv2dShape& s);
void backward_weight(vk::Commands& cmd, vk::View dy, vk::View x, vk::View dweight,
                     const Conv2dShape& s);

}  // namespace brigade::ops::direct
