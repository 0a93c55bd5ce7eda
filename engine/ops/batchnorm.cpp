#include "ops/batchnorm.h"

#include <string>

#include "shaders/norm.h"
#include "ops/launch_geometry.h"
#include "vk/check.h"

namespace brigade::ops {

void batchnorm_forward_train(vk::Commands& cmd, vk::View x, vk::View weight, vk::View bias,
                             vk::View y, vk::View mean, vk::View rstd, vk::View stats,
                             uint32_t N, uint32_t C, uint32_t HW, bool accumulate, float eps) {
  if (uint64_t(N) * HW < 2)
    throw UserError("batchnorm: training needs more than 1 value per channel, got N=" +
                    std::to_string(N) + " x H*W=" + std::to_string(HW) +
                    " (use a larger micro-batch)");
  vk::Device& dev = cmd.device();
  cmd.dispatch(dev.kernel("batchnorm_forward_train", reduction_spec(dev, uint64_t(N) * HW)),
               {x, weight, bias, y, mean, rstd, stats},
               shaders::BatchNormPush{N, C, HW, eps, accumulate ? 1u : 0u}, capped_groups(C, 1));
}

void batchnorm_update_running(vk::Commands& cmd, vk::View stats, vk::View running_mean,
                              vk::View running_var, uint32_t C, float momentum) {
  if (C == 0) return;
  cmd.dispatch(cmd.device().kernel("batchnorm_update_running"), {stats, running_mean, running_var},
               shaders::BatchNormUpdatePush{C, momentum}, {vk::groups_for(C, BRIGADE_WG_NORM)});
}

void batchnorm_forward_eval(vk::Commands& cmd, vk::View x, vk::View weight, vk::View bias,
                            vk::View running_mean, vk::View running_var, vk::View y,
                            uint32_t N, uint32_t C, uint32_t HW, float eps) {
  const uint64_t n = uint64_t(N) * C * HW;
  if (n == 0) return;
  cmd.dispatch(cmd.device().kernel("batchnorm_forward_eval"),
               {x, weight, bias, running_mean, running_var, y},
               shaders::BatchNormPush{N, C, HW, eps, 0u}, capped_groups(n, BRIGADE_WG_NORM));
}

void batchnorm_backward(vk::Commands& cmd, vk::View dy, vk::View x, vk::View weight,
                        vk::View mean, vk::View rstd, vk::View dx, vk::View dweight,
                        vk::View dbias, uint32_t N, uint32_t C, uint32_t HW) {
  if (uint64_t(N) * HW == 0 || C == 0) return;
  vk::Device& dev = cmd.device();
  cmd.dispatch(dev.kernel("batchnorm_backward", reduction_spec(dev, uint64_t(N) * HW)),
               {dy, x, weight, mean, rstd, dx, dweight, dbias},
               shaders::BatchNormPush{N, C, HW, 0.0f, 0u}, capped_groups(C, 1));
}

}  // namespace brigade::ops
