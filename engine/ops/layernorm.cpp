#include "ops/layernorm.h"

#include "shaders/norm.h"
#include "ops/launch_geometry.h"

namespace brigade::ops {

void layernorm_forward(vk::Commands& cmd, vk::View x, vk::View weight, vk::View bias,
                       vk::View y, vk::View mean, vk::View rstd, uint32_t N, uint32_t C,
                       float eps) {
  if (N == 0 || C == 0) return;
  vk::Device& dev = cmd.device();
  cmd.dispatch(dev.kernel("layernorm_forward", reduction_spec(dev, C).set(1, quads(C, {x, weight, bias, y}))),
               {x, weight, bias, y, mean, rstd}, shaders::LayerNormPush{N, C, eps},
               capped_groups(N, 1));
}

void layernorm_backward_data(vk::Commands& cmd, vk::View dy, vk::View x, vk::View weight,
                             vk::View mean, vk::View rstd, vk::View dx, uint32_t N,
                             uint32_t C) {
  if (N == 0 || C == 0) return;
  vk::Device& dev = cmd.device();
  cmd.dispatch(dev.kernel("layernorm_backward_data", reduction_spec(dev, C).set(1, quads(C, {dy, x, weight, dx}))),
               {dy, x, weight, mean, rstd, dx}, shaders::LayerNormPush{N, C, 0.0f},
               capped_groups(N, 1));
}

void layernorm_backward_weight(vk::Commands& cmd, vk::View dy, vk::View x, vk::View mean,
                               vk::View rstd, vk::View dweight, vk::View dbias, uint32_t N,
                               uint32_t C) {
  if (C == 0) return;
  cmd.dispatch(cmd.device().kernel("layernorm_backward_weight"),
               {dy, x, mean, rstd, dweight, dbias}, shaders::LayerNormPush{N, C, 0.0f},
               {vk::groups_for(C, BRIGADE_WG_NORM)});
}

}  // namespace brigade::ops
