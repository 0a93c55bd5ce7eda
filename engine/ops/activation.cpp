#include "ops/activation.h"

#include "shaders/elementwise.h"
#include "ops/launch_geometry.h"

namespace brigade::ops {
namespace {

void launch(vk::Commands& cmd, const char* shader, std::initializer_list<vk::View> bindings,
            uint32_t n) {
  if (n == 0) return;
  cmd.dispatch(cmd.device().kernel(shader), bindings, shaders::ElementwisePush{n},
               capped_groups(n, BRIGADE_WG_ELEMENTWISE));
}

}  // namespace

void relu_forward(vk::Commands& cmd, vk::View x, vk::View y, uint32_t n) {
  launch_vec4(cmd, "relu_forward", {x, y}, n);
}

void relu_backward(vk::Commands& cmd, vk::View y, vk::View dy, vk::View dx, uint32_t n,
                   Precision y_format) {
  launch_vec4(cmd, format_kernel("relu_backward", {y_format}).c_str(), {y, dy, dx}, n,
              vk::Specialization().set(1, uint32_t(y_format)));
}

void gelu_forward(vk::Commands& cmd, vk::View x, vk::View y, uint32_t n) {
  launch(cmd, "gelu_forward", {x, y}, n);
}

void gelu_backward(vk::Commands& cmd, vk::View x, vk::View dy, vk::View dx, uint32_t n) {
  launch(cmd, "gelu_backward", {x, dy, dx}, n);
}

}  // namespace brigade::ops
