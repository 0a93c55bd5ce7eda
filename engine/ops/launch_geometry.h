// Launch geometry shared by the element-wise, normalization and loss launchers.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <initializer_list>

#include "shaders/elementwise.h"
#include "shaders/workgroup_reduce.h"
#include "vk/commands.h"
#include "vk/device.h"

namespace brigade::ops {

// The most workgroups these launchers dispatch along a dimension: BRIGADE_MAX_GROUPS_X, the
// x-dimension limit every device supports, unless the tests lower it (tests/main.cpp's
// --max-groups) so that every kernel's loop over what the cap leaves out runs on small tensors.
inline std::atomic<uint32_t>& max_groups() {
  static std::atomic<uint32_t> groups{BRIGADE_MAX_GROUPS_X};
  return groups;
}

// Workgroups for `n` items at `per_group` items per workgroup, capped at max_groups(); the
// kernels loop over what the cap leaves out.
inline vk::Groups capped_groups(uint64_t n, uint32_t per_group) {
  return {uint32_t(std::min<uint64_t>(vk::groups_for(n, per_group), max_groups().load(std::memory_order_relaxed)))};
}

// Whether a kernel with a VEC4 variant may read and write these views as vec4s: the count it
// walks in fours (elements, channels, pixels) a multiple of 4 and every view 16-byte aligned.
inline bool quads(uint64_t n, std::initializer_list<vk::View> views) {
  bool ok = n % 4 == 0;
  for (const vk::View& v : views) ok = ok && v.offset % 16 == 0;
  return ok;
}

// An elementwise kernel over n elements (shaders/elementwise.h) with a VEC4 variant
// (specialization constant 0: four elements an invocation), taken where quads() allows;
// `spec` holds the kernel's other constants.
inline void launch_vec4(vk::Commands& cmd, const std::string& shader,
                        std::initializer_list<vk::View> bindings, uint32_t n,
                        vk::Specialization spec = {}) {
  if (n == 0) return;
  const bool vec4 = quads(n, bindings);
  cmd.dispatch(cmd.device().kernel(shader, spec.set(0, vec4 ? 1 : 0)), bindings,
               shaders::ElementwisePush{n}, capped_groups(vec4 ? n / 4 : n, BRIGADE_WG_ELEMENTWISE));
}

// Workgroup width of a kernel that reduces `items` values per workgroup (see
// shaders/workgroup_reduce.h). CPU devices get one subgroup, so no barrier runs; GPUs get
// enough subgroups that each lane sums about four values, up to BRIGADE_WG_REDUCE_MAX.
inline uint32_t reduction_width(const vk::Device& dev, uint64_t items) {
  const uint32_t subgroup = std::max(dev.info().subgroup_size, 1u);
  if (dev.info().type == VK_PHYSICAL_DEVICE_TYPE_CPU) return subgroup;
  const uint32_t widest =
      std::min<uint32_t>(BRIGADE_WG_REDUCE_MAX, subgroup * BRIGADE_REDUCE_MAX_SUBGROUPS);
  uint32_t width = subgroup;
  while (width * 2 <= widest && uint64_t(width) * 4 < items) width *= 2;
  return width;
}

inline vk::Specialization reduction_spec(const vk::Device& dev, uint64_t items) {
  return vk::Specialization().set(0, reduction_width(dev, items));
}

// Workgroups for a kernel that gives each row to one workgroup at a time and walks the rest
// of the rows in steps of the grid: on CPU devices at most 256, so each takes many rows and
// what it loads once (LayerNorm's weight and bias) serves them all; on GPUs one per row, up
// to a dispatch's limit.
inline vk::Groups row_groups(const vk::Device& dev, uint64_t rows) {
  if (dev.info().type == VK_PHYSICAL_DEVICE_TYPE_CPU) return capped_groups(std::min<uint64_t>(rows, 256), 1);
  return capped_groups(rows, 1);
}

}  // namespace brigade::ops
