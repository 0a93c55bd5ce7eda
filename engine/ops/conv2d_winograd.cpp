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
  // The filters twice: the backward holds U for the input gradient and sums dU for the
  // weight gradient.
  uint64_t scratch(uint32_t samples) const {
    const uint64_t columns = uint64_t(samples) * per_sample();
    return padded(points() * s.ic * columns) + padded(points() * s.oc * columns) + 2 * filters_floats();
  }
};

Tiled tiled(const Conv2dShape& s, uint32_t tile) { return {s, tile ? tile : tile_for(s)}; }

// The scratch's parts for `columns` tiles: the transformed filters (U, and the weight
// gradient's dU), the transformed input of the forward (its `in` channels, IC) and its
// products (`out` channels, OC), which the backward uses for dV and dM.
struct Parts {
  vk::View filters, filters_grad, in, out;
};
Parts parts_of(vk::View scratch, uint64_t columns, const Tiled& t) {
  const vk::Buffer& b = *scratch.buffer;
  const uint64_t f = t.filters_floats() * 4, at_in = scratch.offset + 2 * f, p = t.points();
  const uint64_t filters = p * t.s.ic * t.s.oc * 4;
  return {vk::View(b, scratch.offset, filters), vk::View(b, scratch.offset + f, filters),
          vk::View(b, at_in, p * t.s.ic * columns * 4), vk::View(b, at_in + padded(p * t.s.ic * columns) * 4, p * t.s.oc * columns * 4)};
}

// Samples per chunk: as many as the scratch holds (at least one), and as a dispatch's 65535
// workgroups of BRIGADE_WG_CONV tiles hold.
uint32_t chunk_of(const Tiled& t, vk::View scratch) {
  const uint64_t one = t.scratch(1) * 4;
  BRIGADE_EXPECT(scratch.range >= one, "conv2d scratch of " + std::to_string(scratch.range) +
                                           " bytes holds less than one sample (" + std::to_string(one) + " bytes)");
  const uint64_t dispatch = 65535ull * BRIGADE_WG_CONV / t.per_sample();
  uint64_t count =
      std::min<uint64_t>({t.s.n, (scratch.range / 4 - 2 * t.filters_floats()) / t.sample_floats(), dispatch});
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
  direct::require_groups(groups, "conv2d", "winograd tiles", {"use smaller micro-batches or smaller images", "use fewer channels"});
  cmd.dispatch(cmd.device().kernel(kernel, spec), views, shaders::WinogradPush{channels, 0, first, count},
               groups);
}

void input_transform(vk::Commands& cmd, vk::View x, vk::View v, const Geometry& g, uint64_t columns,
                     uint32_t channels, uint32_t first, uint32_t count, Precision format) {
  // A row of tiles an invocation (shaders/conv2d_winograd_input.comp).
  vk::Specialization spec = geometry_spec(g);
  spec.set(11, uint32_t(format));
  const uint32_t tw = (g.ow + g.m - 1) / g.m;
  tile_pass(cmd, format_kernel("conv2d_winograd_input", {format}), spec, {x, v}, {}, columns / tw, channels, first,
            count);
}

// A pass over the filters: U from the weight, or the weight gradient from dU. The grid is
// capped and the kernels walk the rest (IC x OC filters can pass 65535 workgroups).
void filter_pass(vk::Commands& cmd, const char* kernel, vk::View from, vk::View to, const Tiled& t) {
  cmd.dispatch(cmd.device().kernel(kernel, vk::Specialization().set(kTileSpec, t.m)), {from, to},
               shaders::WinogradPush{t.s.ic, t.s.oc, 0, 0}, capped_groups(uint64_t(t.s.ic) * t.s.oc, BRIGADE_WG_CONV));
}

// The products of one chunk, one per point: C[p] (M, N) = op(A[p]) (M, K) . op(B[p]) (K, N),
// accumulated for the weight gradient's sum over chunks.
void products(vk::Commands& cmd, vk::View a, vk::View b, vk::View c, uint32_t M, uint32_t N, uint32_t K,
              const Tiled& t, bool trans_a = false, bool trans_b = false, bool accumulate = false) {
  MatmulParams mm{.M = M, .N = N, .K = K, .trans_a = trans_a, .trans_b = trans_b, .accumulate = accumulate,
                  .batch = t.points()};
  mm.stride_a = M * K, mm.stride_b = K * N, mm.stride_c = M * N;
  matmul(cmd, a, b, c, mm);
}

// The forward convolution: y (OC planes a sample, stored as f.y) from x (IC planes, stored as
// f.x) and the weight's filters; `out_spec` says how the output transform stores.
void convolve(vk::Commands& cmd, vk::View x, vk::View y, Formats f, std::optional<vk::View> codes,
              vk::View weight, std::optional<vk::View> bias, const Geometry& g, vk::Specialization out_spec,
              const Tiled& t, vk::View scratch) {
  const uint32_t chunk = chunk_of(t, scratch);
  const uint64_t per = t.tiles(g.oh, g.ow);
  const vk::View u = parts_of(scratch, 0, t).filters;
  filter_pass(cmd, "conv2d_winograd_filter", weight, u, t);
  for (uint32_t first = 0; first < t.s.n; first += chunk) {
    const uint32_t count = std::min(chunk, t.s.n - first);
    const Parts p = parts_of(scratch, count * per, t);
    input_transform(cmd, x, p.in, g, count * per, t.s.ic, first, count, f.x);
    products(cmd, u, p.in, p.out, t.s.oc, uint32_t(count * per), t.s.ic, t);
    tile_pass(cmd, format_kernel("conv2d_winograd_output", {f.y}), out_spec,
              {p.out, y, bias.value_or(p.out), codes.value_or(y)}, {}, count * per, t.s.oc, first, count);
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
  convolve(cmd, x, y, f, codes, weight, bias, g, out_spec, t, scratch);
}

void backward(vk::Commands& cmd, vk::View dy, const Gradients& g, const Conv2dShape& s, vk::View scratch,
              Precision x_format, uint32_t tile) {
  BRIGADE_EXPECT(bool(g.dx) == bool(g.weight) && bool(g.dweight) == bool(g.x),
                 "Winograd's backward: the input gradient needs the weight, the weight gradient x");
  const Tiled t = tiled(s, tile);
  const Geometry geo = forward_geometry(t);
  const uint32_t chunk = chunk_of(t, scratch);
  const uint64_t per = t.tiles(geo.oh, geo.ow);
  const Parts filters = parts_of(scratch, 0, t);
  if (g.dx) filter_pass(cmd, "conv2d_winograd_filter", *g.weight, filters.filters, t);
  for (uint32_t first = 0; first < s.n; first += chunk) {
    const uint32_t count = std::min(chunk, s.n - first);
    const Parts p = parts_of(scratch, count * per, t);
    tile_pass(cmd, "conv2d_winograd_output_grad", geometry_spec(geo).set(16, bool(g.codes)),
              {dy, p.out, g.codes.value_or(dy)}, p.out, count * per, s.oc, first, count);
    if (g.dweight) {
      // dU[p] (OC, IC) = dM[p] (OC, tiles) . V[p] (IC, tiles)^T, the chunks summed in order.
      input_transform(cmd, *g.x, p.in, geo, count * per, s.ic, first, count, x_format);
      products(cmd, p.out, p.in, filters.filters_grad, s.oc, s.ic, uint32_t(count * per), t, false, true, first > 0);
    }
    if (!g.dx) continue;
    // dV[p] (IC, tiles) = U[p]^T . dM[p] (OC, tiles), over V (vk::Commands orders it after
    // the weight gradient's read), then each tile's B dV B^T added into dx, a row of tiles
    // an invocation.
    products(cmd, filters.filters, p.out, p.in, s.ic, uint32_t(count * per), s.oc, t, true);
    const uint32_t th = (geo.oh + t.m - 1) / t.m;
    for (uint32_t parity = 0; parity < std::min(th, 2u); ++parity) {  // even rows of tiles, then odd
      const vk::Groups groups{vk::groups_for(uint64_t(count) * s.ic * ((th + 1 - parity) / 2), BRIGADE_WG_CONV)};
      direct::require_groups(groups, s, "winograd tile rows", {"use smaller micro-batches or fewer input channels"});
      cmd.dispatch(cmd.device().kernel(format_kernel("conv2d_winograd_input_grad", {x_format}),
                                       geometry_spec(geo).set(11, uint32_t(x_format))),
                   {p.in, *g.dx},
                   shaders::WinogradPush{s.ic, parity, first, count}, groups);
    }
  }
  if (g.dweight) filter_pass(cmd, "conv2d_winograd_filter_grad", filters.filters_grad, *g.dweight, t);
}

}  // namespace brigade::ops::winograd
