#include "ops/conv2d_winograd.h"

#include <algorithm>
#include <string>

#include "ops/conv2d_direct.h"
#include "ops/launch_geometry.h"
#include "ops/matmul.h"
#include "shaders/conv.h"
#include "util/error.h"

namespace brigade::ops::winograd {
namespace {

constexpr uint64_t kAlign = 64;  // floats between parts: every device's offset alignment

uint64_t padded(uint64_t floats) { return (floats + kAlign - 1) / kAlign * kAlign; }

// A shape worked in tiles of m x m outputs: points() products per tile and channel pair.
struct Tiled {
  const Conv2dShape& s;
  uint32_t m;

  uint32_t points() const { return (m + 2) * (m + 2); }
  uint64_t tiles(uint32_t h, uint32_t w) const { return uint64_t((h + m - 1) / m) * ((w + m - 1) / m); }
  // Tiles per sample of the larger of the two outputs the passes cover: y's, and dx's.
  uint64_t per_sample() const { return std::max(tiles(s.out_h(), s.out_w()), tiles(s.h, s.w)); }
  uint64_t filters_floats() const { return padded(uint64_t(points()) * s.ic * s.oc); }
  // Floats each sample adds: its transformed input and products, of the larger pass.
  uint64_t sample_floats() const { return uint64_t(points()) * (s.ic + s.oc) * per_sample(); }
  uint64_t scratch(uint32_t samples) const {
    const uint64_t columns = uint64_t(samples) * per_sample();
    return padded(points() * s.ic * columns) + padded(points() * s.oc * columns) + filters_floats();
  }
};

Tiled tiled(const Conv2dShape& s, uint32_t tile) { return {s, tile ? tile : tile_for(s)}; }

// The scratch's parts for `columns` tiles: the transformed filters, the transformed input of
// a pass (its `in` channels) and its products (`out` channels).
struct Parts {
  vk::View filters, in, out;
};
Parts parts_of(vk::View scratch, uint32_t in, uint32_t out, uint64_t columns, const Tiled& t) {
  const vk::Buffer& b = *scratch.buffer;
  const uint64_t at_in = scratch.offset + t.filters_floats() * 4, p = t.points();
  return {vk::View(b, scratch.offset, p * t.s.ic * t.s.oc * 4), vk::View(b, at_in, p * in * columns * 4),
          vk::View(b, at_in + padded(p * in * columns) * 4, p * out * columns * 4)};
}

// Samples per chunk: as many as the scratch holds (at least one), and as a dispatch's 65535
// workgroups of BRIGADE_WG_CONV tiles hold.
uint32_t chunk_of(const Tiled& t, vk::View scratch) {
  const uint64_t one = t.scratch(1) * 4;
  BRIGADE_EXPECT(scratch.range >= one, "conv2d scratch of " + std::to_string(scratch.range) +
                                           " bytes holds less than one sample (" + std::to_string(one) + " bytes)");
  const uint64_t dispatch = 65535ull * BRIGADE_WG_CONV / t.per_sample();
  uint64_t count =
      std::min<uint64_t>({t.s.n, (scratch.range / 4 - t.filters_floats()) / t.sample_floats(), dispatch});
  while (count > 1 && t.scratch(uint32_t(count)) * 4 > scratch.range) --count;
  return uint32_t(std::max<uint64_t>(count, 1));
}

// The geometry of a transform kernel: planes of h x w padded by (ph, pw), an output of
// oh x ow (shaders/conv_geometry.glsl), in tiles of m.
struct Geometry {
  uint32_t h, w, oh, ow, ph, pw, m;
};
Geometry forward_geometry(const Tiled& t) {
  return {t.s.h, t.s.w, t.s.out_h(), t.s.out_w(), t.s.pad_h, t.s.pad_w, t.m};
}
// The input gradient's convolution: dy's planes padded by 2 - pad, dx's size out.
Geometry backward_geometry(const Tiled& t) {
  return {t.s.out_h(), t.s.out_w(), t.s.h, t.s.w, 2 - t.s.pad_h, 2 - t.s.pad_w, t.m};
}

constexpr uint32_t kTileSpec = 15;  // shaders/winograd.glsl's TILE

vk::Specialization geometry_spec(const Geometry& g) {
  vk::Specialization spec;
  spec.set(1, g.h).set(2, g.w).set(3, g.oh).set(4, g.ow).set(5, 3u).set(6, 3u).set(7, 1u).set(8, 1u);
  spec.set(9, g.ph).set(10, g.pw).set(kTileSpec, g.m);
  return spec;
}

// A tile kernel over `channels` planes of samples first .. first + count - 1: `columns` tiles
// (the geometry's, in `spec`) an invocation each. One whose specialization constant 0 says
// QUADS takes four columns of `points`, its transformed tensor, where quads() allows.
void tile_pass(vk::Commands& cmd, const std::string& kernel, vk::Specialization spec,
               std::initializer_list<vk::View> views, std::optional<vk::View> points, uint64_t columns, uint32_t channels, uint32_t first, uint32_t count) {
  const bool vec4 = points && quads(columns, {*points});
  if (points) spec.set(0, vec4);
  const vk::Groups groups{vk::groups_for(columns / (vec4 ? 4 : 1), BRIGADE_WG_CONV), channels, 1};
  direct::require_groups(groups, "winograd tiles");
  cmd.dispatch(cmd.device().kernel(kernel, spec), views, shaders::WinogradPush{channels, 0, first, count},
               groups);
}

void input_transform(vk::Commands& cmd, vk::View x, vk::View v, const Geometry& g, uint64_t columns,
                     uint32_t channels, uint32_t first, uint32_t count, Precision format) {
  vk::Specialization spec = geometry_spec(g);
  spec.set(11, uint32_t(format));
  tile_pass(cmd, format_kernel("conv2d_winograd_input", {format}), spec, {x, v}, {}, columns, channels, first,
            count);
}

// A pass over the filters: U from the weight (flipped for the input gradient), or the
// weight gradient from dU.
void filter_pass(vk::Commands& cmd, const char* kernel, vk::Specialization spec, vk::View from, vk::View to,
                 const Tiled& t) {
  cmd.dispatch(cmd.device().kernel(kernel, spec.set(kTileSpec, t.m)), {from, to},
               shaders::WinogradPush{t.s.ic, t.s.oc, 0, 0}, {vk::groups_for(uint64_t(t.s.ic) * t.s.oc, BRIGADE_WG_CONV)});
}

// The products of one chunk, one per point: C[p] (M, N) = A[p] (M, K) . B[p] (K, N), or with
// B stored (N, K) and C accumulated, the weight gradient's sum.
void products(vk::Commands& cmd, vk::View a, vk::View b, vk::View c, uint32_t M, uint32_t N, uint32_t K,
              const Tiled& t, bool weight_gradient = false, bool accumulate = false) {
  MatmulParams mm{.M = M, .N = N, .K = K, .trans_b = weight_gradient, .accumulate = accumulate,
                  .batch = t.points()};
  mm.stride_a = M * K, mm.stride_b = K * N, mm.stride_c = M * N;
  matmul(cmd, a, b, c, mm);
}

// One Winograd convolution, the forward's or the input gradient's: `out` (`to` planes a
// sample) from `in` (`from` planes, stored as `in_format`) and the weight's filters, flipped
// for the input gradient; `out_spec` says how the output transform stores (`out_format`).
struct Convolution {
  vk::View in, out;
  uint32_t from, to;
  bool flip;
  Precision in_format, out_format;
  std::optional<vk::View> codes = {};  // the output transform pools (POOL) and writes them
};
void convolve(vk::Commands& cmd, const Convolution& c, vk::View weight, std::optional<vk::View> bias,
              const Geometry& g, vk::Specialization out_spec, const Tiled& t, vk::View scratch) {
  const uint32_t chunk = chunk_of(t, scratch);
  const uint64_t per = t.tiles(g.oh, g.ow);
  const vk::View u = parts_of(scratch, c.from, c.to, 0, t).filters;
  filter_pass(cmd, "conv2d_winograd_filter", vk::Specialization().set(0, c.flip), weight, u, t);
  for (uint32_t first = 0; first < t.s.n; first += chunk) {
    const uint32_t count = std::min(chunk, t.s.n - first);
    const Parts p = parts_of(scratch, c.from, c.to, count * per, t);
    input_transform(cmd, c.in, p.in, g, count * per, c.from, first, count, c.in_format);
    products(cmd, u, p.in, p.out, c.to, uint32_t(count * per), c.from, t);
    tile_pass(cmd, format_kernel("conv2d_winograd_output", {c.out_format}), out_spec,
              {p.out, c.out, bias.value_or(p.out), c.codes.value_or(c.out)}, {}, count * per, c.to, first, count);
  }
}

}  // namespace

bool fits(const Conv2dShape& s) {
  return s.kh == 3 && s.kw == 3 && s.stride_h == 1 && s.stride_w == 1 && s.pad_h <= 2 && s.pad_w <= 2;
}

bool pays(const Conv2dShape& s) { return fits(s) && s.ic >= 16; }

bool stores_half(const Conv2dShape& s) { return s.out_w() % 2 == 0; }

uint32_t tile_for(const Conv2dShape& s) {
  // The tile that takes fewer products for the larger output the passes cover (4x4 tiles
  // cover a plane whose sides are not multiples of 4 with waste); a tie goes to 2x2, whose
  // transforms are cheaper.
  const Tiled two{s, 2}, four{s, 4};
  return four.points() * four.per_sample() < two.points() * two.per_sample() ? 4 : 2;
}

uint64_t floats_per_sample(const Conv2dShape& s, uint32_t tile) { return tiled(s, tile).sample_floats(); }

uint64_t scratch_floats(const Conv2dShape& s, uint32_t samples, uint32_t tile) {
  return tiled(s, tile).scratch(samples);
}

void forward(vk::Commands& cmd, vk::View x, vk::View weight, std::optional<vk::View> bias, vk::View y,
             const Conv2dShape& s, vk::View scratch, Formats f, uint32_t tile, std::optional<vk::View> codes) {
  BRIGADE_EXPECT(!codes || !is_half(f.y), "Winograd's pooling output transform stores fp32 only");
  const Tiled t = tiled(s, tile);
  const Geometry g = forward_geometry(t);
  vk::Specialization out_spec = geometry_spec(g);
  out_spec.set(11, uint32_t(f.y)).set(13, bool(bias)).set(14, bool(codes));
  convolve(cmd, {x, y, s.ic, s.oc, false, f.x, f.y, codes}, weight, bias, g, out_spec, t, scratch);
}

void backward_data(vk::Commands& cmd, vk::View dy, vk::View weight, vk::View dx, const Conv2dShape& s,
                   vk::View scratch, Precision dx_round, uint32_t tile) {
  const Tiled t = tiled(s, tile);
  const Geometry g = backward_geometry(t);
  vk::Specialization out_spec = geometry_spec(g);
  out_spec.set(0, true).set(12, uint32_t(dx_round));  // dx += the tiles, rounded
  convolve(cmd, {dy, dx, s.oc, s.ic, true, Precision::Fp32, dx_round}, weight, std::nullopt, g, out_spec, t,
           scratch);
}

void backward_weight(vk::Commands& cmd, vk::View dy, vk::View x, vk::View dweight, const Conv2dShape& s,
                     vk::View scratch, Precision x_format, uint32_t tile) {
  const Tiled t = tiled(s, tile);
  const Geometry g = forward_geometry(t);
  const uint32_t chunk = chunk_of(t, scratch);
  const uint64_t per = t.tiles(g.oh, g.ow);
  const vk::View du = parts_of(scratch, s.ic, s.oc, 0, t).filters;
  for (uint32_t first = 0; first < s.n; first += chunk) {
    const uint32_t count = std::min(chunk, s.n - first);
    const Parts p = parts_of(scratch, s.ic, s.oc, count * per, t);
    input_transform(cmd, x, p.in, g, count * per, s.ic, first, count, x_format);
    tile_pass(cmd, "conv2d_winograd_output_grad", geometry_spec(g), {dy, p.out}, p.out, count * per, s.oc,
              first, count);
    // dU[p] (OC, IC) = dM[p] (OC, tiles) . V[p] (IC, tiles)^T, the chunks summed in order.
    products(cmd, p.out, p.in, du, s.oc, s.ic, uint32_t(count * per), t, true, first > 0);
  }
  filter_pass(cmd, "conv2d_winograd_filter_grad", {}, du, dweight, t);
}

}  // namespace brigade::ops::winograd
