#include "ops/residual.h"

#include "shaders/elementwise.h"
#include "ops/launch_geometry.h"

namespace brigade::ops {

void residual_forward(vk::Commands& cmd, vk::View a, vk::View b, vk::View y, uint32_t n) {
  launch_vec4(cmd, "residual_forward", {a, b, y}, n);
}

void residual_backward(vk::Commands& cmd, vk::View dy, vk::View da, vk::View db, uint32_t n) {
  launch_vec4(cmd, "residual_backward", {dy, da, db}, n);
}

}  // namespace brigade::ops
