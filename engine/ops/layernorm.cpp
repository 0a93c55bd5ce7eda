#include "ops/layernorm.h"

#include "shaders/norm.h"
#include "ops/launch_geometry.h"

namespace brigade::ops {
namespace {

// The row kernels' width, vec4 or not, and the elements of a row each lane keeps (KEEP).
vk::Specialization row_spec(const vk::Device& dev, uint32_t C, bool vec4) {
  const uint32_t width = reduction_width(dev, C), L = vec4 ? C / 4 : C;
  return vk::Specialization().set(0, width).set(1, vec4).set(2, (L + width - 1) / width);
}

}  // namespace

void layernorm_forward(vk::Commands& cmd, vk::View x, vk::View weight, vk::View bias,
                       vk::View y, vk::View mean, vk::View rstd, uint32_t N, uint32_t C,
                       float eps) {
  if (N == 0 || C == 0) return;
  vk::Device& dev = cmd.device();
  cmd.dispatch(dev.kernel("layernorm_forward", row_spec(dev, C, quads(C, {x, weight, bias, y}))),
               {x, weight, bias, y, mean, rstd}, shaders::LayerNormPush{N, C, eps}, row_groups(dev, N));
}

void layernorm_backward_data(vk::Commands& cmd, vk::View dy, vk::View x, vk::View weight,
                             vk::View mean, vk::View rstd, vk::View dx, uint32_t N,
                             uint32_t C) {
  if (N == 0 || C == 0) return;
  vk::Device& dev = cmd.device();
  cmd.dispatch(dev.kernel("layernorm_backward_data", row_spec(dev, C, quads(C, {dy, x, weight, dx}))),
               {dy, x, weight, mean, rstd, dx}, shaders::LayerNormPush{N, C, 0.0f}, row_groups(dev, N));
}

void layernorm_backward_weight(vk::Commands& cmd, vk::View dy, vk::View x, vk::View mean,
                               vk::View rstd, vk::View dweight, vk::View dbias, uint32_t N,
                               uint32_t C, uint32_t lanes) {
  if (C == 0) return;
  const bool vec4 = quads(C, {dy, x, dweight, dbias});
  const ColumnLanes g = column_lanes(cmd.device(), vec4 ? C / 4 : C, lanes, vk::Specialization().set(0, vec4));
  cmd.dispatch(cmd.device().kernel("layernorm_backward_weight", g.spec), {dy, x, mean, rstd, dweight, dbias},
               shaders::LayerNormPush{N, C, 0.0f}, g.groups);
}

}  // namespace brigade::ops
