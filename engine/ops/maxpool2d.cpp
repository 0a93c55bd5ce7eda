#include "ops/maxpool2d.h"

#include <algorithm>
#include <string>

#include "ops/launch_geometry.h"
#include "util/error.h"

namespace brigade::ops {
namespace {

// Workgroups of 8 x 8 over columns and rows of `w` x `h`, planes (N x C) on z: capped, the
// kernels walk the planes in steps of the grid's depth.
vk::Groups grid(uint32_t w, uint32_t h, const MaxPool2dShape& s) {
  return {vk::groups_for(w, BRIGADE_WG_POOL_X), vk::groups_for(h, BRIGADE_WG_POOL_Y),
          capped_groups(uint64_t(s.n) * s.c, 1).x};
}

// 2 x 2 windows, stride 2, tiling an input of even sides, read (and written) as aligned pairs.
bool pairs(const MaxPool2dShape& s, std::initializer_list<vk::View> views) {
  if (s.k != 2 || s.s != 2 || s.h % 2 || s.w % 2) return false;
  for (const vk::View& v : views)
    if (v.offset % 8) return false;
  return true;
}

// Pairs, two neighbouring windows of a row read (and written) as aligned quads: rows of a
// multiple of 4 (so an even number of windows a row).
bool window_quads(const MaxPool2dShape& s, std::initializer_list<vk::View> views) {
  if (!pairs(s, views) || s.w % 4) return false;
  for (const vk::View& v : views)
    if (v.offset % 16) return false;
  return true;
}

// `out`: the forward's y format, or the backward's rounding of dx.
const vk::Kernel& kernel(vk::Commands& cmd, const char* name, const MaxPool2dShape& s, bool pairs, bool quads,
                         Precision x, Precision out) {
  return cmd.device().kernel(format_kernel(name, {x, out}), vk::Specialization{}.set(0, s.k).set(1, s.s).set(2, pairs).set(3, s.relu)
                                       .set(4, uint32_t(x)).set(5, uint32_t(out)).set(6, quads));
}

shaders::MaxPool2dPush push_of(const MaxPool2dShape& s) {
  return {s.h, s.w, s.out_h(), s.out_w(), s.n * s.c};
}

// A 16-bit y: one invocation per word (two outputs), on a flat grid of workgroups.
vk::Groups word_grid(const MaxPool2dShape& s) {
  const uint64_t groups = vk::groups_for((s.y_size() + 1) / 2, BRIGADE_WG_POOL_X * BRIGADE_WG_POOL_Y);
  const uint32_t x = uint32_t(std::min<uint64_t>(groups, 65535));
  const uint64_t y = (groups + x - 1) / x;
  if (y > 65535) throw UserError("maxpool2d forward: the output is too large for one dispatch; use smaller micro-batches");
  return {x, uint32_t(y), 1};
}

}  // namespace

void maxpool2d_validate(const MaxPool2dShape& s) {
  const auto dims = std::to_string(s.n) + "x" + std::to_string(s.c) + "x" + std::to_string(s.h) +
                    "x" + std::to_string(s.w) + " input, window " + std::to_string(s.k) +
                    ", stride " + std::to_string(s.s);
  if (!s.n || !s.c || !s.h || !s.w || !s.k || !s.s)
    throw UserError("maxpool2d: a dimension, window or stride is zero (" + dims + ")");
  if (s.k > s.h || s.k > s.w)
    throw UserError("maxpool2d: the window is larger than the input (" + dims + ")");
}

void maxpool2d_forward(vk::Commands& cmd, vk::View x, vk::View y, const MaxPool2dShape& s, Formats f) {
  maxpool2d_validate(s);
  BRIGADE_EXPECT_BYTES(x, stored_bytes(s.x_size(), f.x), "maxpool2d input");
  BRIGADE_EXPECT_BYTES(y, stored_bytes(s.y_size(), f.y), "maxpool2d output");
  // Two windows an invocation where window_quads() allows (y stored a pair or word at a time).
  const bool four = window_quads(s, {x}) && y.offset % 8 == 0;
  const vk::Groups groups = four          ? grid(s.out_w() / 2, s.out_h(), s)
                            : is_half(f.y) ? word_grid(s)
                                           : grid(s.out_w(), s.out_h(), s);
  cmd.dispatch(kernel(cmd, "maxpool2d_forward", s, pairs(s, {x}), four, f.x, f.y), {x, y}, push_of(s), groups);
}

void maxpool2d_backward_data(vk::Commands& cmd, vk::View x, vk::View dy, vk::View dx,
                             const MaxPool2dShape& s, Formats f) {
  maxpool2d_validate(s);
  BRIGADE_EXPECT_BYTES(x, stored_bytes(s.x_size(), f.x), "maxpool2d input");
  BRIGADE_EXPECT_FLOATS(dy, s.y_size(), "maxpool2d output gradient");
  BRIGADE_EXPECT_FLOATS(dx, s.x_size(), "maxpool2d input gradient");
  // Windows tiling the input in pairs: one invocation per window, or per two with
  // window_quads(); otherwise one per input element.
  const bool tiled = pairs(s, {x, dx}), four = window_quads(s, {x, dx}) && dy.offset % 8 == 0;
  const vk::Groups groups = four    ? grid(s.out_w() / 2, s.out_h(), s)
                            : tiled ? grid(s.out_w(), s.out_h(), s)
                                    : grid(s.w, s.h, s);
  cmd.dispatch(kernel(cmd, "maxpool2d_backward_data", s, tiled, four, f.x, f.x), {x, dy, dx}, push_of(s),
               groups);
}

}  // namespace brigade::ops
