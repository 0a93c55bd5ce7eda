#include "ops/residual.h"

#include "shaders/elementwise.h"
#include "ops/launch_geometry.h"

namespace brigade::ops {

void residual_forward(vk::Commands& cmd, vk::View a, vk::View b, vk::View y, uint32_t n) {
  if (n == 0) return;
  cmd.dispatch(cmd.device().kernel("residual_forward"), {a, b, y}, shaders::ElementwisePush{n},
               capped_groups(n, BRIGADE_WG_ELEMENTWISE));
}

void residual_backward(vk::Commands& cmd, vk::View dy, vk::View da, vk::View db, uint32_t n) {
  if (n == 0) return;
  cmd.dispatch(cmd.device().kernel("residual_backward"), {dy, da, db},
               shaders::ElementwisePush{n}, capped_groups(n, BRIGADE_WG_ELEMENTWISE));
}

}  // namespace brigade::ops
