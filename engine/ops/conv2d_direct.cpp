#include "ops/conv2d_direct.h"

#include <algorithm>

namespace brigade::ops::direct {
namespace {

// Outputs per invocation (see shaders/conv.h). On a CPU device a load from a storage buffer
// costs far more than an FMA and private arrays stay in cache, so large tiles win (measured
// on lavapipe: GPU timestamps, 2 threads, N = 32, 32 -> 64 channels on 14 x 14, these tiles
// against 8 x 8 and 4 x 4: forward 10.8 / 20.9 / 35.1 ms, backward-data 9.2 / 17.3 / 32.0 ms,
// backward-weight 14.6 / 20.6 / 47.0 ms). Elsewhere a conventional 4 x 4 of registers.
struct Tiles {
  uint32_t forward_oc, forward_px, data_ic, data_px, weight_oc, weight_k;
};
Tiles tiles_for(const vk::PhysicalInfo& info) {
  if (info.type == VK_PHYSICAL_DEVICE_TYPE_CPU) return {32, 16, 32, 16, 16, 16};
  return {4, 4, 4, 4, 4, 4};
}

// The tile actually run over `extent` outputs: never larger than the extent (IC = 1 would
// otherwise compute 8 channels and keep one), and in blocks of equal size.
uint32_t fit(uint32_t tile, uint32_t extent) {
  const uint32_t blocks = vk::groups_for(extent, std::min(tile, extent));
  return vk::groups_for(extent, blocks);
}

}  // namespace

void forward(vk::Commands& cmd, vk::View x, vk::View weight, std::optional<vk::View> bias,
             vk::View y, const Conv2dShape& s) {
  const Tiles t = tiles_for(cmd.device().info());
  const uint32_t ocb = fit(t.forward_oc, s.oc), px = fit(t.forward_px, s.out_w());
  const auto& kernel = cmd.device().kernel(
      "conv2d_forward", vk::Specialization{}.set(0, ocb).set(1, px).set(2, bias ? 1 : 0));
  const uint32_t blocks_per_row = vk::groups_for(s.out_w(), px);
  const vk::Groups groups{vk::groups_for(uint64_t(s.out_h()) * blocks_per_row, BRIGADE_WG_CONV),
                          vk::groups_for(s.oc, ocb), s.n};
  require_groups(groups, s, "forward", {});
  // Without a bias the shader never reads binding 2; the weight stands in for it.
  cmd.dispatch(kernel, {x, weight, bias ? *bias : weight, y}, push_of(s), groups);
}

void backward_data(vk::Commands& cmd, vk::View dy, vk::View weight, vk::View dx,
                   const Conv2dShape& s) {
  const Tiles t = tiles_for(cmd.device().info());
  // Blocks of PX pixels within each of the stride_w phases of an input row.
  const uint32_t per_phase = vk::groups_for(s.w, s.stride_w);
  const uint32_t icb = fit(t.data_ic, s.ic), px = fit(t.data_px, per_phase);
  const auto& kernel = cmd.device().kernel("conv2d_backward_data",
                                           vk::Specialization{}.set(0, icb).set(1, px));
  const uint64_t blocks_per_row = uint64_t(s.stride_w) * vk::groups_for(per_phase, px);
  const vk::Groups groups{vk::groups_for(s.h * blocks_per_row, BRIGADE_WG_CONV),
                          vk::groups_for(s.ic, icb), s.n};
  require_groups(groups, s, "backward-data", {kSmallerImages, "use fewer input channels"});
  cmd.dispatch(kernel, {dy, weight, dx}, push_of(s), groups);
}

void backward_weight(vk::Commands& cmd, vk::View dy, vk::View x, vk::View dweight,
                     const Conv2dShape& s) {
  vk::Device& dev = cmd.device();
  const Tiles t = tiles_for(dev.info());
  const uint32_t k_total = s.ic * s.kh * s.kw;
  const uint32_t ocb = fit(t.weight_oc, s.oc), kb = fit(t.weight_k, k_total);
  BRIGADE_EXPECT(uint64_t(ocb) * kb * BRIGADE_WG_CONV_REDUCE * 4 <= dev.info().max_shared_memory,
                 "conv2d weight tile " + std::to_string(ocb) + "x" + std::to_string(kb) +
                     " needs more shared memory than " + dev.label() + " has");
  const auto& kernel = dev.kernel("conv2d_backward_weight",
                                  vk::Specialization{}.set(0, ocb).set(1, kb));
  const vk::Groups groups{vk::groups_for(k_total, kb), vk::groups_for(s.oc, ocb)};
  require_groups(groups, s, "backward-weight", {"use fewer input channels or a smaller kernel"});
  cmd.dispatch(kernel, {dy, x, dweight}, push_of(s), groups);
}

}  // namespace brigade::ops::direct
