#include "ops/conv2d_pool.h"

#include <algorithm>

#include "ops/conv2d_direct.h"
#include "ops/conv2d_winograd.h"
#include "ops/launch_geometry.h"
#include "ops/linear.h"
#include "util/error.h"

namespace brigade::ops {
namespace {

uint32_t pairs_of(const Conv2dShape& s) { return (s.out_h() / 2) * (s.out_w() / 4); }

// The weight gradient's partial sums: a row per sample and column of pairs, weights then
// (256 bytes on) biases. Four channels an invocation (a word of codes): on lavapipe the
// first convolution's weight gradient took 0.76 to 0.85 ms so, 1.1 to 1.4 with 8 and 1.05
// to 1.2 with 16, whose sums spill from the registers.
constexpr uint32_t kChannels = 4;
uint64_t partial_rows(const Conv2dShape& s) { return uint64_t(s.n) * (s.out_w() / 4); }
uint64_t weight_partial_floats(const Conv2dShape& s) { return (partial_rows(s) * s.weight_size() + 63) / 64 * 64; }

// Pairs of pooled outputs on x, samples (forward) or planes (unpool: capped, the kernel
// walks the rest in steps of the grid's depth) on z. The forward keeps one sample a z: its
// kernel unrolls every output channel, and in a loop over samples lavapipe's compiler took
// minutes over 1024 of them.
vk::Groups grid(const Conv2dShape& s, uint64_t z, const char* pass) {
  const vk::Groups g{vk::groups_for(pairs_of(s), BRIGADE_WG_CONV), 1, uint32_t(std::min<uint64_t>(z, UINT32_MAX))};
  direct::require_groups(g, s, pass, {});
  return g;
}

uint64_t dense_floats(const Conv2dShape& s) { return (s.y_size() + 63) / 64 * 64; }
uint64_t pooled_size(const Conv2dShape& s) { return uint64_t(s.n) * s.oc * (s.out_h() / 2) * (s.out_w() / 2); }
// The tiles fold's fp32 pooled output before it is packed, for a 16-bit y: after the
// convolution's output.
uint64_t pooled_floats(const Conv2dShape& s, Precision y) {
  return is_half(y) && !conv2d_pool_fits(s) ? (pooled_size(s) + 63) / 64 * 64 : 0;
}

// The pooling pass (mode 0) or the spreading back (mode 1) over tiles of `tile`
// (shaders/conv2d_pool_tiles.comp).
void tiles_pass(vk::Commands& cmd, uint32_t mode, vk::View dense, vk::View pooled, vk::View codes,
                const Conv2dShape& s, uint32_t tile) {
  const uint64_t tiles = uint64_t((s.out_h() + tile - 1) / tile) * ((s.out_w() + tile - 1) / tile);
  const uint32_t planes = s.n * s.oc;  // walked in steps of the grid's capped depth
  const vk::Groups g{vk::groups_for(tiles, BRIGADE_WG_CONV), 1, capped_groups(planes, 1).x};
  direct::require_groups(g, s, mode ? "pooling backward" : "pooling", {});
  const vk::Specialization spec = vk::Specialization().set(0, s.out_h()).set(1, s.out_w()).set(2, tile).set(3, mode);
  cmd.dispatch(cmd.device().kernel("conv2d_pool_tiles", spec), {dense, pooled, codes}, planes, g);
}

}  // namespace

bool conv2d_pool_fits(const Conv2dShape& s) {
  const uint64_t patch = uint64_t(s.ic) * (s.stride_h + s.kh) * (3 * s.stride_w + s.kw);
  return s.out_h() % 2 == 0 && s.out_w() % 4 == 0 && s.oc % 4 == 0 && s.weight_size() <= kPoolFoldWeights &&
         patch <= kPoolFoldPatch;
}

bool conv2d_pool_tiles_fit(const Conv2dShape& s) { return s.out_h() >= 2 && s.out_w() >= 2; }

uint32_t conv2d_pool_tile(const vk::PhysicalInfo& device, const Conv2dShape& s, Precision x) {
  return conv2d_form(device, s, x) == Form::Winograd ? winograd::tile_for(s) : 4;
}

uint64_t conv2d_pool_code_words(const Conv2dShape& s) {
  if (conv2d_pool_fits(s)) return uint64_t(pairs_of(s)) * s.oc / 4;
  return uint64_t(s.oc) * ((s.out_h() + 1) / 2) * ((s.out_w() + 1) / 2);
}

uint64_t conv2d_pool_scratch_floats(const Conv2dShape& s, uint32_t samples, Precision stored) {
  const uint64_t passes = dense_floats(s) + pooled_floats(s, stored) + conv2d_scratch_floats(s, samples, stored);
  return conv2d_pool_fits(s) ? std::max(passes, weight_partial_floats(s) + partial_rows(s) * s.oc) : passes;
}

vk::View conv2d_pool_conv_scratch(const Conv2dShape& s, vk::View scratch, Precision stored) {
  const uint64_t skip = (dense_floats(s) + pooled_floats(s, stored)) * 4;
  BRIGADE_EXPECT(scratch.range > skip, "conv2d pooling scratch holds the convolution's output");
  return vk::View(*scratch.buffer, scratch.offset + skip, scratch.range - skip);
}

void conv2d_pool_forward(vk::Commands& cmd, vk::View x, vk::View weight, std::optional<vk::View> bias,
                         vk::View y, vk::View codes, const Conv2dShape& s, vk::View scratch, Formats f) {
  const uint64_t pooled = pooled_size(s);
  BRIGADE_EXPECT(conv2d_pool_tiles_fit(s), "conv2d with its pooling folded in needs an output of 2 x 2 at least");
  BRIGADE_EXPECT_BYTES(x, stored_bytes(s.x_size(), f.x), "conv2d input");
  BRIGADE_EXPECT_BYTES(y, stored_bytes(pooled, f.y), "pooled output");
  BRIGADE_EXPECT_BYTES(codes, conv2d_pool_code_words(s) * s.n * 4, "pooling codes");
  if (!conv2d_pool_fits(s)) {  // the tiles fold: a 16-bit y pooled in fp32, then packed
    const uint32_t tile = conv2d_pool_tile(cmd.device().info(), s, f.x);
    const vk::View rest = conv2d_pool_conv_scratch(s, scratch, f.y);
    const vk::View out = is_half(f.y) ? vk::View(*scratch.buffer, scratch.offset + dense_floats(s) * 4, pooled * 4) : y;
    if (conv2d_form(cmd.device().info(), s, f.x) == Form::Winograd) {
      winograd::forward(cmd, x, weight, bias, out, s, rest, {f.x, Precision::Fp32}, tile, codes);
    } else {
      const vk::View dense(*scratch.buffer, scratch.offset, s.y_size() * 4);
      conv2d_forward(cmd, x, weight, bias, dense, s, rest, std::nullopt, {f.x, Precision::Fp32});
      tiles_pass(cmd, 0, dense, out, codes, s, tile);
    }
    if (is_half(f.y)) pack(cmd, out, y, uint32_t(pooled), f.y, false);
    return;
  }
  BRIGADE_EXPECT(y.offset % 8 == 0, "the pooled output is stored a pair at a time (8-byte aligned)");
  vk::Specialization spec;
  spec.set(1, s.h).set(2, s.w).set(3, s.out_h()).set(4, s.out_w()).set(5, s.kh).set(6, s.kw);
  spec.set(7, s.stride_h).set(8, s.stride_w).set(9, s.pad_h).set(10, s.pad_w);
  spec.set(11, s.ic).set(12, s.oc).set(13, bool(bias)).set(14, uint32_t(f.x)).set(15, uint32_t(f.y));
  cmd.dispatch(cmd.device().kernel(format_kernel("conv2d_pool_forward", {f.x, f.y}), spec),
               {x, weight, bias.value_or(weight), y, codes}, direct::push_of(s), grid(s, s.n, "forward"));
}

vk::View conv2d_pool_unpool(vk::Commands& cmd, vk::View dy, vk::View codes, const Conv2dShape& s, vk::View scratch,
                            Precision x) {
  BRIGADE_EXPECT_FLOATS(dy, uint64_t(s.n) * s.oc * (s.out_h() / 2) * (s.out_w() / 2), "pooled output gradient");
  BRIGADE_EXPECT_BYTES(codes, conv2d_pool_code_words(s) * s.n * 4, "pooling codes");
  BRIGADE_EXPECT(dy.offset % 8 == 0 && scratch.offset % 16 == 0,
                 "the spreading back reads pairs and writes quads (8- and 16-byte aligned)");
  const vk::View dense(*scratch.buffer, scratch.offset, s.y_size() * 4);
  if (!conv2d_pool_fits(s)) {
    tiles_pass(cmd, 1, dense, dy, codes, s, conv2d_pool_tile(cmd.device().info(), s, x));
    return dense;
  }
  const vk::Specialization spec = vk::Specialization().set(0, s.out_h()).set(1, s.out_w()).set(2, s.oc);
  cmd.dispatch(cmd.device().kernel("conv2d_pool_unpool", spec), {dy, codes, dense}, direct::push_of(s),
               grid(s, capped_groups(uint64_t(s.n) * s.oc, 1).x, "backward"));
  return dense;
}

void conv2d_pool_backward(vk::Commands& cmd, vk::View dy, vk::View codes, vk::View x, vk::View weight,
                          std::optional<vk::View> dx, std::optional<vk::View> dweight, std::optional<vk::View> dbias,
                          const Conv2dShape& s, vk::View scratch, Formats f) {
  BRIGADE_EXPECT(!conv2d_pool_fits(s) && conv2d_pool_tiles_fit(s), "the tiles fold's backward needs a shape it takes");
  BRIGADE_EXPECT(dweight || !dbias, "the tiles fold's bias gradient comes with the weight gradient");
  const vk::View rest = conv2d_pool_conv_scratch(s, scratch, f.x);
  if (conv2d_form(cmd.device().info(), s, f.x) == Form::Winograd) {
    BRIGADE_EXPECT_FLOATS(dy, uint64_t(s.n) * s.oc * (s.out_h() / 2) * (s.out_w() / 2), "pooled output gradient");
    BRIGADE_EXPECT_BYTES(codes, conv2d_pool_code_words(s) * s.n * 4, "pooling codes");
    const uint32_t tile = conv2d_pool_tile(cmd.device().info(), s, f.x);
    winograd::backward(cmd, dy, {dx, dx ? std::optional(weight) : std::nullopt, dweight,
                                 dweight ? std::optional(x) : std::nullopt, codes},
                       s, rest, f.x, tile);
    if (dbias) conv2d_backward_bias(cmd, dy, *dbias, s, codes, tile);
    return;
  }
  conv2d_backward(cmd, conv2d_pool_unpool(cmd, dy, codes, s, scratch, f.x), x, weight, dx, dweight, dbias, s, rest,
                  std::nullopt, {f.x, Precision::Fp32});
}

void conv2d_pool_backward_weight(vk::Commands& cmd, vk::View dy, vk::View codes, vk::View x, vk::View dweight,
                                 std::optional<vk::View> dbias, const Conv2dShape& s, vk::View scratch,
                                 Precision x_format) {
  BRIGADE_EXPECT(conv2d_pool_fits(s), "the pooling fold's own weight gradient needs a shape conv2d_pool_fits takes");
  BRIGADE_EXPECT_FLOATS(dy, s.y_size() / 4, "pooled output gradient");
  BRIGADE_EXPECT_BYTES(codes, conv2d_pool_code_words(s) * s.n * 4, "pooling codes");
  BRIGADE_EXPECT_BYTES(x, stored_bytes(s.x_size(), x_format), "conv2d input");
  BRIGADE_EXPECT_FLOATS(scratch, weight_partial_floats(s) + partial_rows(s) * s.oc, "conv2d pooling scratch");
  BRIGADE_EXPECT(dy.offset % 8 == 0, "the pooled gradient is read a pair at a time (8-byte aligned)");
  const uint64_t rows = partial_rows(s), taps = s.weight_size() / s.oc;
  const vk::View pw(*scratch.buffer, scratch.offset, rows * s.weight_size() * 4),
      pb(*scratch.buffer, scratch.offset + weight_partial_floats(s) * 4, rows * s.oc * 4);
  vk::Specialization spec;
  spec.set(1, s.h).set(2, s.w).set(3, s.out_h()).set(4, s.out_w()).set(5, s.kh).set(6, s.kw);
  spec.set(7, s.stride_h).set(8, s.stride_w).set(9, s.pad_h).set(10, s.pad_w);
  spec.set(11, s.ic).set(12, s.oc).set(13, kChannels).set(14, uint32_t(x_format));
  const vk::Groups g{vk::groups_for(rows, BRIGADE_WG_CONV), s.oc / kChannels, 1};
  direct::require_groups(g, s, "pooling weight gradient", {"use smaller micro-batches or smaller images"});
  cmd.dispatch(cmd.device().kernel(format_kernel("conv2d_pool_weight", {x_format}), spec), {dy, codes, x, pw, pb},
               direct::push_of(s), g);
  linear_bias_backward(cmd, pw, dweight, uint32_t(rows), uint32_t(s.oc * taps));
  if (dbias) linear_bias_backward(cmd, pb, *dbias, uint32_t(rows), s.oc);
}

}  // namespace brigade::ops
