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

// What a grid's dimensions stand for, in the words of what the user can change: the
// advice printed when that dimension passes a dispatch's limit.
inline constexpr const char* kSmallerImages = "use smaller images or a larger stride";
struct GroupAdvice {
  const char* x = kSmallerImages;
  const char* y = "use fewer output channels";
  const char* z = "use smaller micro-batches";
};

// The layer in a refusal's words: "conv2d (16 -> 1 channels, 1x1 kernel, 1024x1024 input)".
inline std::string layer_of(const Conv2dShape& s) {
  return "conv2d (" + std::to_string(s.ic) + " -> " + std::to_string(s.oc) + " channels, " + std::to_string(s.kh) + "x" +
         std::to_string(s.kw) + " kernel, " + std::to_string(s.h) + "x" + std::to_string(s.w) + " input)";
}

// Refuses a grid past maxComputeWorkGroupCount every device guarantees (65535 a dimension),
// naming the layer (`layer`: layer_of's words, or what the pass knows of them), its pass and
// what the user can change for the dimension that passes it.
inline void require_groups(vk::Groups g, const std::string& layer, const char* pass, GroupAdvice advice) {
  constexpr uint32_t kMax = 65535;
  const char* what = g.x > kMax ? advice.x : g.y > kMax ? advice.y : g.z > kMax ? advice.z : nullptr;
  if (what)
    throw UserError(layer + " " + pass + ": too large for one dispatch (" + std::to_string(g.x) + " x " +
                    std::to_string(g.y) + " x " + std::to_string(g.z) + " workgroups, at most " +
                    std::to_string(kMax) + " a dimension); " + what);
}
inline void require_groups(vk::Groups g, const Conv2dShape& s, const char* pass, GroupAdvice advice) {
  if (g.x > 65535 || g.y > 65535 || g.z > 65535) require_groups(g, layer_of(s), pass, advice);
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
