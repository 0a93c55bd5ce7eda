#include "ops/layernorm.h"

#include "shaders/norm.h"
#include "ops/column_sums.h"
#include "ops/launch_geometry.h"
#include "util/error.h"

namespace brigade::ops {
namespace {

// The row kernels' width, vec4 or not, and the elements of a row each lane keeps (KEEP).
vk::Specialization row_spec(const vk::Device& dev, uint32_t C, bool vec4) {
  const uint32_t width = reduction_width(dev, C), L = vec4 ? C / 4 : C;
  return vk::Specialization().set(0, width).set(1, vec4).set(2, (L + width - 1) / width);
}

// A 16-bit x or y is read and written a quad (two words) at a time.
void expect_quads(bool vec4, Formats f, const char* pass) {
  BRIGADE_EXPECT(vec4 || !(is_half(f.x) || is_half(f.y)),
                 std::string("layernorm ") + pass + " on 16 bits needs C % 4 == 0 and 16-byte aligned views");
}

}  // namespace

void layernorm_forward(vk::Commands& cmd, vk::View x, vk::View weight, vk::View bias,
                       vk::View y, vk::View mean, vk::View rstd, uint32_t N, uint32_t C,
                       float eps, Formats f) {
  if (N == 0 || C == 0) return;
  vk::Device& dev = cmd.device();
  const bool vec4 = quads(C, {x, weight, bias, y});
  expect_quads(vec4, f, "forward");
  cmd.dispatch(dev.kernel(format_kernel("layernorm_forward", {f.x, f.y}),
                          row_spec(dev, C, vec4).set(3, uint32_t(f.x)).set(4, uint32_t(f.y))),
               {x, weight, bias, y, mean, rstd}, shaders::LayerNormPush{N, C, eps}, row_groups(dev, N));
}

void layernorm_backward_data(vk::Commands& cmd, vk::View dy, vk::View x, vk::View weight,
                             vk::View mean, vk::View rstd, vk::View dx, uint32_t N,
                             uint32_t C, Precision x_format, Precision dx_round, const LayerNormGrad& around) {
  const std::optional<vk::View>& copy = around.copy;
  BRIGADE_EXPECT(bool(copy) == is_half(around.copy_format), "layernorm's copy of dx and its 16-bit format come together");
  if (copy) BRIGADE_EXPECT_BYTES(*copy, stored_bytes(uint64_t(N) * C, around.copy_format), "layernorm dx's copy");
  if (around.residual) BRIGADE_EXPECT_FLOATS(*around.residual, uint64_t(N) * C, "layernorm's residual gradient");
  if (N == 0 || C == 0) return;
  vk::Device& dev = cmd.device();
  const bool vec4 = quads(C, {dy, x, weight, dx, around.residual.value_or(dx)}) && (!copy || copy->offset % 16 == 0);
  expect_quads(vec4, {x_format, around.copy_format}, "backward");
  const std::string kernel = format_kernel("layernorm_backward_data", {x_format, dx_round, around.copy_format});
  const vk::Specialization spec = row_spec(dev, C, vec4)
                                      .set(3, uint32_t(x_format))
                                      .set(4, uint32_t(dx_round))
                                      .set(5, uint32_t(around.copy_format))
                                      .set(6, around.residual.has_value());
  const shaders::LayerNormPush push{N, C, 0.0f};
  // dx stands in for the residual and the copy where there are none; the plain build has no copy.
  const vk::View residual = around.residual.value_or(dx);
  if (kernel != "layernorm_backward_data")
    cmd.dispatch(dev.kernel(kernel, spec), {dy, x, weight, mean, rstd, dx, residual, copy.value_or(dx)}, push,
                 row_groups(dev, N));
  else
    cmd.dispatch(dev.kernel(kernel, spec), {dy, x, weight, mean, rstd, dx, residual}, push, row_groups(dev, N));
}

void layernorm_backward_weight(vk::Commands& cmd, vk::View dy, vk::View x, vk::View mean,
                               vk::View rstd, vk::View dweight, vk::View dbias, uint32_t N,
                               uint32_t C, ColumnWalk walk, Precision x_format) {
  if (C == 0) return;
  const bool vec4 = quads(C, {dy, x, dweight, dbias});
  expect_quads(vec4, {x_format}, "weight gradient");
  const ColumnSums g(cmd, vec4 ? C / 4 : C, C, N, walk,
                     vk::Specialization().set(0, vec4).set(3, uint32_t(x_format)), 2);
  cmd.dispatch(cmd.device().kernel(format_kernel("layernorm_backward_weight", {x_format}), g.spec()),
               {dy, x, mean, rstd, g.into(0, dweight), g.into(1, dbias)},
               shaders::LayerNormPush{N, C, 0.0f}, g.groups());
  g.finish(cmd, {dweight, dbias});
}

}  // namespace brigade::ops
