#include "ops/conv2d.h"

#include <string>

#include "vk/check.h"

namespace brigade::ops {
namespace {

// A view too small for its tensor would let the kernel read or write past it: a bug in the
// caller, reported with the launcher's file:line.
void require_floats(vk::View v, uint64_t floats, const char* what, int line) {
  if (v.range < floats * 4)
    throw vk::VulkanError(std::string(__FILE__) + ":" + std::to_string(line) + ": conv2d " + what +
                              " '" + v.buffer->name() + "' holds " + std::to_string(v.range / 4) +
                              " floats, the shape needs " + std::to_string(floats),
                          VK_ERROR_UNKNOWN);
}

void require_tile(uint32_t t, const char* what) {
  if (t == 0 || t > 64)
    throw vk::VulkanError(std::string(__FILE__) + ": Conv2dTiles::" + what + " = " +
                              std::to_string(t) + ", expected 1..64",
                          VK_ERROR_UNKNOWN);
}

void require_groups(vk::Groups g, const char* pass) {
  constexpr uint32_t kMax = 65535;  // maxComputeWorkGroupCount every device guarantees
  if (g.x > kMax || g.y > kMax || g.z > kMax)
    throw UserError(std::string("conv2d ") + pass + ": the tensor is too large for one dispatch (" +
                    std::to_string(g.x) + " x " + std::to_string(g.y) + " x " +
                    std::to_string(g.z) + " workgroups); use smaller micro-batches");
}

shaders::Conv2dPush push_of(const Conv2dShape& s) {
  return {s.n, s.ic, s.h, s.w, s.oc, s.kh, s.kw, s.out_h(), s.out_w(),
          s.stride_h, s.stride_w, s.pad_h, s.pad_w};
}

}  // namespace

void conv2d_validate(const Conv2dShape& s) {
  const auto dims = std::to_string(s.n) + "x" + std::to_string(s.ic) + "x" + std::to_string(s.h) +
                    "x" + std::to_string(s.w) + " input, " + std::to_string(s.oc) + "x" +
                    std::to_string(s.ic) + "x" + std::to_string(s.kh) + "x" +
                    std::to_string(s.kw) + " weight";
  if (!s.n || !s.ic || !s.h || !s.w || !s.oc || !s.kh || !s.kw)
    throw UserError("conv2d: a dimension is zero (" + dims + ")");
  if (!s.stride_h || !s.stride_w) throw UserError("conv2d: stride must be at least 1 (" + dims + ")");
  if (s.h + 2 * s.pad_h < s.kh || s.w + 2 * s.pad_w < s.kw)
    throw UserError("conv2d: the kernel is larger than the padded input (" + dims + ", padding " +
                    std::to_string(s.pad_h) + "x" + std::to_string(s.pad_w) + ")");
}

void conv2d_forward(vk::Commands& cmd, vk::View x, vk::View weight, std::optional<vk::View> bias,
                    vk::View y, const Conv2dShape& s, const Conv2dTiles& tiles) {
  conv2d_validate(s);
  require_tile(tiles.forward_oc, "forward_oc");
  require_tile(tiles.forward_px, "forward_px");
  require_floats(x, s.x_size(), "input", __LINE__);
  require_floats(weight, s.weight_size(), "weight", __LINE__);
  if (bias) require_floats(*bias, s.oc, "bias", __LINE__);
  require_floats(y, s.y_size(), "output", __LINE__);
  vk::Device& dev = cmd.device();
  const auto& kernel = dev.kernel("conv2d_forward", vk::Specialization{}
                                                        .set(0, tiles.forward_oc)
                                                        .set(1, tiles.forward_px)
                                                        .set(2, bias ? 1 : 0));
  const uint32_t blocks_per_row = vk::groups_for(s.out_w(), tiles.forward_px);
  const vk::Groups groups{vk::groups_for(uint64_t(s.out_h()) * blocks_per_row, BRIGADE_WG_CONV),
                          vk::groups_for(s.oc, tiles.forward_oc), s.n};
  require_groups(groups, "forward");
  // Without a bias the shader never reads binding 2; the weight stands in for it.
  cmd.dispatch(kernel, {x, weight, bias ? *bias : weight, y}, push_of(s), groups);
}

void conv2d_backward_data(vk::Commands& cmd, vk::View dy, vk::View weight, vk::View dx,
                          const Conv2dShape& s, const Conv2dTiles& tiles) {
  conv2d_validate(s);
  require_tile(tiles.data_ic, "data_ic");
  require_tile(tiles.data_px, "data_px");
  require_floats(dy, s.y_size(), "output gradient", __LINE__);
  require_floats(weight, s.weight_size(), "weight", __LINE__);
  require_floats(dx, s.x_size(), "input gradient", __LINE__);
  vk::Device& dev = cmd.device();
  const auto& kernel = dev.kernel(
      "conv2d_backward_data", vk::Specialization{}.set(0, tiles.data_ic).set(1, tiles.data_px));
  // Blocks of PX pixels within each of the stride_w phases of an input row.
  const uint32_t per_phase = vk::groups_for(s.w, s.stride_w);
  const uint64_t blocks_per_row = uint64_t(s.stride_w) * vk::groups_for(per_phase, tiles.data_px);
  const vk::Groups groups{vk::groups_for(s.h * blocks_per_row, BRIGADE_WG_CONV),
                          vk::groups_for(s.ic, tiles.data_ic), s.n};
  require_groups(groups, "backward-data");
  cmd.dispatch(kernel, {dy, weight, dx}, push_of(s), groups);
}

void conv2d_backward_weight(vk::Commands& cmd, vk::View dy, vk::View x, vk::View dweight,
                            std::optional<vk::View> dbias, const Conv2dShape& s,
                            const Conv2dTiles& tiles) {
  conv2d_validate(s);
  require_tile(tiles.weight_oc, "weight_oc");
  require_tile(tiles.weight_k, "weight_k");
  if (uint64_t(tiles.weight_oc) * tiles.weight_k * BRIGADE_WG_CONV_REDUCE * 4 >
      cmd.device().info().max_shared_memory)
    throw vk::VulkanError(std::string(__FILE__) + ": Conv2dTiles weight_oc x weight_k = " +
                              std::to_string(tiles.weight_oc * tiles.weight_k) +
                              " partial sums per invocation exceed the device's shared memory",
                          VK_ERROR_UNKNOWN);
  require_floats(dy, s.y_size(), "output gradient", __LINE__);
  require_floats(x, s.x_size(), "input", __LINE__);
  require_floats(dweight, s.weight_size(), "weight gradient", __LINE__);
  if (dbias) require_floats(*dbias, s.oc, "bias gradient", __LINE__);
  vk::Device& dev = cmd.device();
  const auto push = push_of(s);
  const auto& kernel = dev.kernel("conv2d_backward_weight", vk::Specialization{}
                                                                .set(0, tiles.weight_oc)
                                                                .set(1, tiles.weight_k));
  const vk::Groups groups{vk::groups_for(uint64_t(s.ic) * s.kh * s.kw, tiles.weight_k),
                          vk::groups_for(s.oc, tiles.weight_oc)};
  require_groups(groups, "backward-weight");
  cmd.dispatch(kernel, {dy, x, dweight}, push, groups);
  if (dbias) cmd.dispatch(dev.kernel("conv2d_backward_bias"), {dy, *dbias}, push, {s.oc});
}

}  // namespace brigade::ops
