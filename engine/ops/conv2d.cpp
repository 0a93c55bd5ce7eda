#include "ops/conv2d.h"

#include <algorithm>
#include <string>

#include "vk/check.h"

namespace brigade::ops {
namespace {

void require_groups(vk::Groups g, const char* pass) {
  constexpr uint32_t kMax = 65535;  // maxComputeWorkGroupCount every device guarantees
  if (g.x > kMax || g.y > kMax || g.z > kMax)
    throw UserError(std::string("conv2d ") + pass + ": the tensor is too large for one dispatch (" +
                    std::to_string(g.x) + " x " + std::to_string(g.y) + " x " +
                    std::to_string(g.z) + " workgroups); use smaller micro-batches");
}

// The tile actually run over `extent` outputs: never larger than the extent (IC = 1 would
// otherwise compute 8 channels and keep one), and in blocks of equal size.
uint32_t fit(uint32_t tile, uint32_t extent) {
  BRIGADE_EXPECT(tile >= 1 && tile <= 64, "conv2d register tile of " + std::to_string(tile) + ", expected 1..64");
  const uint32_t blocks = vk::groups_for(extent, std::min(tile, extent));
  return vk::groups_for(extent, blocks);
}

shaders::Conv2dPush push_of(const Conv2dShape& s) {
  return {s.n, s.ic, s.h, s.w, s.oc, s.kh, s.kw, s.out_h(), s.out_w(),
          s.stride_h, s.stride_w, s.pad_h, s.pad_w};
}

Conv2dTiles tiles_or_default(const std::optional<Conv2dTiles>& tiles, const vk::Commands& cmd) {
  return tiles ? *tiles : Conv2dTiles::for_device(cmd.device().info());
}

}  // namespace

Conv2dTiles Conv2dTiles::for_device(const vk::PhysicalInfo& info) {
  // On lavapipe a load from a storage buffer costs far more than an FMA and private arrays
  // stay in cache, so large tiles win. GPU timestamps, 2 threads, N = 32, 32 -> 64 channels
  // on 14 x 14 (231 MFLOP a pass), these tiles vs 8 x 8 vs 4 x 4: forward 10.8 / 20.9 /
  // 35.1 ms, backward-data 9.2 / 17.3 / 32.0 ms, backward-weight 14.6 / 20.6 / 47.0 ms.
  // On a GPU that many accumulators would spill: 4 x 4 there (not yet measured).
  if (info.type == VK_PHYSICAL_DEVICE_TYPE_CPU) return {32, 16, 32, 16, 16, 16};
  return {};
}

void conv2d_validate(const Conv2dShape& s) {
  const auto dims = std::to_string(s.n) + "x" + std::to_string(s.ic) + "x" + std::to_string(s.h) +
                    "x" + std::to_string(s.w) + " input, " + std::to_string(s.oc) + "x" +
                    std::to_string(s.ic) + "x" + std::to_string(s.kh) + "x" +
                    std::to_string(s.kw) + " weight";
  if (!s.n || !s.ic || !s.h || !s.w || !s.oc || !s.kh || !s.kw)
    throw UserError("conv2d: a dimension is zero (" + dims + ")");
  if (!s.stride_h || !s.stride_w)
    throw UserError("conv2d: stride must be at least 1 (" + dims + ")");
  const uint64_t padded_h = s.h + 2 * uint64_t(s.pad_h), padded_w = s.w + 2 * uint64_t(s.pad_w);
  if (padded_h > UINT32_MAX || padded_w > UINT32_MAX)
    throw UserError("conv2d: the padded input is larger than " + std::to_string(UINT32_MAX) +
                    " in a dimension (" + dims + ", padding " + std::to_string(s.pad_h) + "x" +
                    std::to_string(s.pad_w) + ")");
  if (padded_h < s.kh || padded_w < s.kw)
    throw UserError("conv2d: the kernel is larger than the padded input (" + dims + ", padding " +
                    std::to_string(s.pad_h) + "x" + std::to_string(s.pad_w) + ")");
}

void conv2d_forward(vk::Commands& cmd, vk::View x, vk::View weight, std::optional<vk::View> bias,
                    vk::View y, const Conv2dShape& s, std::optional<Conv2dTiles> tiles) {
  conv2d_validate(s);
  BRIGADE_EXPECT_FLOATS(x, s.x_size(), "conv2d input");
  BRIGADE_EXPECT_FLOATS(weight, s.weight_size(), "conv2d weight");
  if (bias) BRIGADE_EXPECT_FLOATS(*bias, s.oc, "conv2d bias");
  BRIGADE_EXPECT_FLOATS(y, s.y_size(), "conv2d output");
  const Conv2dTiles t = tiles_or_default(tiles, cmd);
  const uint32_t ocb = fit(t.forward_oc, s.oc);
  const uint32_t px = fit(t.forward_px, s.out_w());
  const auto& kernel = cmd.device().kernel(
      "conv2d_forward", vk::Specialization{}.set(0, ocb).set(1, px).set(2, bias ? 1 : 0));
  const uint32_t blocks_per_row = vk::groups_for(s.out_w(), px);
  const vk::Groups groups{vk::groups_for(uint64_t(s.out_h()) * blocks_per_row, BRIGADE_WG_CONV),
                          vk::groups_for(s.oc, ocb), s.n};
  require_groups(groups, "forward");
  // Without a bias the shader never reads binding 2; the weight stands in for it.
  cmd.dispatch(kernel, {x, weight, bias ? *bias : weight, y}, push_of(s), groups);
}

void conv2d_backward_data(vk::Commands& cmd, vk::View dy, vk::View weight, vk::View dx,
                          const Conv2dShape& s, std::optional<Conv2dTiles> tiles) {
  conv2d_validate(s);
  BRIGADE_EXPECT_FLOATS(dy, s.y_size(), "conv2d output gradient");
  BRIGADE_EXPECT_FLOATS(weight, s.weight_size(), "conv2d weight");
  BRIGADE_EXPECT_FLOATS(dx, s.x_size(), "conv2d input gradient");
  const Conv2dTiles t = tiles_or_default(tiles, cmd);
  // Blocks of PX pixels within each of the stride_w phases of an input row.
  const uint32_t per_phase = vk::groups_for(s.w, s.stride_w);
  const uint32_t icb = fit(t.data_ic, s.ic), px = fit(t.data_px, per_phase);
  const auto& kernel = cmd.device().kernel("conv2d_backward_data",
                                           vk::Specialization{}.set(0, icb).set(1, px));
  const uint64_t blocks_per_row = uint64_t(s.stride_w) * vk::groups_for(per_phase, px);
  const vk::Groups groups{vk::groups_for(s.h * blocks_per_row, BRIGADE_WG_CONV),
                          vk::groups_for(s.ic, icb), s.n};
  require_groups(groups, "backward-data");
  cmd.dispatch(kernel, {dy, weight, dx}, push_of(s), groups);
}

void conv2d_backward_weight(vk::Commands& cmd, vk::View dy, vk::View x, vk::View dweight,
                            std::optional<vk::View> dbias, const Conv2dShape& s,
                            std::optional<Conv2dTiles> tiles) {
  conv2d_validate(s);
  BRIGADE_EXPECT_FLOATS(dy, s.y_size(), "conv2d output gradient");
  BRIGADE_EXPECT_FLOATS(x, s.x_size(), "conv2d input");
  BRIGADE_EXPECT_FLOATS(dweight, s.weight_size(), "conv2d weight gradient");
  if (dbias) BRIGADE_EXPECT_FLOATS(*dbias, s.oc, "conv2d bias gradient");
  vk::Device& dev = cmd.device();
  const Conv2dTiles t = tiles_or_default(tiles, cmd);
  const uint32_t k_total = s.ic * s.kh * s.kw;
  const uint32_t ocb = fit(t.weight_oc, s.oc), kb = fit(t.weight_k, k_total);
  BRIGADE_EXPECT(uint64_t(ocb) * kb * BRIGADE_WG_CONV_REDUCE * 4 <= dev.info().max_shared_memory,
                 "conv2d weight tile " + std::to_string(ocb) + "x" + std::to_string(kb) +
                     " needs more shared memory than " + dev.label() + " has");
  const auto push = push_of(s);
  const auto& kernel = dev.kernel("conv2d_backward_weight",
                                  vk::Specialization{}.set(0, ocb).set(1, kb));
  const vk::Groups groups{vk::groups_for(k_total, kb), vk::groups_for(s.oc, ocb)};
  require_groups(groups, "backward-weight");
  cmd.dispatch(kernel, {dy, x, dweight}, push, groups);
  if (!dbias) return;
  require_groups({s.oc}, "backward-bias");
  cmd.dispatch(dev.kernel("conv2d_backward_bias"), {dy, *dbias}, push, {s.oc});
}

}  // namespace brigade::ops
