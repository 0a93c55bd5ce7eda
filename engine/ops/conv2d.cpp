#include "ops/conv2d.h"

#include <algorithm>
#include <string>

#include "ops/conv2d_direct.h"
#include "ops/conv2d_winograd.h"
#include "ops/launch_geometry.h"
#include "ops/matmul.h"
#include "ops/matmul_tiles.h"
#include "shaders/push.h"
#include "util/error.h"

namespace brigade::ops {
namespace {

using direct::push_of;
using direct::require_groups;

uint32_t taps(const Conv2dShape& s) { return s.ic * s.kh * s.kw; }
uint32_t pixels(const Conv2dShape& s) { return s.out_h() * s.out_w(); }
uint64_t columns_per_sample(const Conv2dShape& s) { return uint64_t(taps(s)) * pixels(s); }

// The grouped weight gradient: up to kGroups partial sums, each padded to 64 floats (256
// bytes, every device's largest minStorageBufferOffsetAlignment), for weights of at most
// kSmallWeight elements: (8 x 16) x (8 x 8) outputs, 16 register tiles of the CPU matmul.
constexpr uint32_t kGroups = 16;
constexpr uint64_t kSmallWeight = 16 * 128 * 64, kAlign = 64;

uint64_t padded(uint64_t floats) { return (floats + kAlign - 1) / kAlign * kAlign; }
uint64_t partial_floats(const Conv2dShape& s) {
  return s.weight_size() <= kSmallWeight ? kGroups * padded(s.weight_size()) : 0;
}

// The precision the matrix form's products take: a 16-bit x's on the matrix units
// (conv2d_matrix_units): the weight and the columns then hold 16-bit values, the output
// gradient is packed for the backward's products (autocast's rule, as Linear's). Otherwise
// fp32, whatever x's format.
Precision products_of(const vk::Commands& cmd, const Conv2dShape& s, Formats f) {
  return conv2d_matrix_units(cmd.device().info(), s, f.x) ? f.x : Precision::Fp32;
}

// Floats of the 16-bit operands' rooms beside the columns: the packed weight, and the packed
// output gradient per sample.
uint64_t packed_weight_floats(const Conv2dShape& s) {
  return padded(stored_bytes(s.weight_size(), Precision::Bf16) / 4);
}
uint64_t packed_dy_per_sample(const Conv2dShape& s) { return uint64_t(s.oc) * pixels(s) / 2; }

// Floats of the matrix form's scratch for `n` samples at a time, each room rounded up to whole
// steps: the columns, the partial sums, and for 16-bit products the packed weight and dy.
uint64_t matrix_floats(const Conv2dShape& s, uint64_t n, bool half) {
  const uint64_t packed = half ? packed_weight_floats(s) + padded(n * packed_dy_per_sample(s)) : 0;
  return padded(n * columns_per_sample(s)) + partial_floats(s) + packed;
}

// The matrix form's scratch for products in `h`: `chunk` samples' columns (fp32 room, which
// the backward's column gradients take; 16-bit columns use its first half), the grouped
// weight gradient's partial sums, and for 16-bit products the packed weight and `chunk`
// samples' packed output gradient. Chunk: as many samples as the scratch holds (at least one),
// at most a dispatch's 65535.
struct Rooms {
  uint32_t chunk;
  vk::View columns, partials, weight, dy;  // weight and dy: empty for fp32 products
};

Rooms rooms_of(const Conv2dShape& s, vk::View scratch, Precision h) {
  const bool half = is_half(h);
  const uint64_t floats = scratch.range / 4, need = matrix_floats(s, 1, half);
  BRIGADE_EXPECT(floats >= need, "conv2d scratch of " + std::to_string(scratch.range) +
                                     " bytes holds less than one sample (" + std::to_string(need * 4) + " bytes)");
  // From an estimate past the rooms' roundings at most by a step each, down to what fits.
  const uint64_t per = columns_per_sample(s) + (half ? packed_dy_per_sample(s) : 0);
  const uint64_t fixed = partial_floats(s) + (half ? packed_weight_floats(s) : 0);
  uint32_t chunk = uint32_t(std::min<uint64_t>({s.n, (floats - fixed) / per, 65535}));
  while (chunk > 1 && matrix_floats(s, chunk, half) > floats) --chunk;
  const uint64_t columns = padded(chunk * columns_per_sample(s)), partials = partial_floats(s);
  const uint64_t weight = half ? packed_weight_floats(s) : 0, dy = half ? padded(chunk * packed_dy_per_sample(s)) : 0;
  auto at = [&](uint64_t offset, uint64_t size) {
    return vk::View(*scratch.buffer, scratch.offset + offset * 4, size * 4);
  };
  return {chunk, at(0, chunk * columns_per_sample(s)), at(columns, partials), at(columns + partials, weight),
          at(columns + partials + weight, dy)};
}

// A pass's products: their precision, the scratch's rooms, and the weight as they read it
// (packed into its room for 16-bit products).
struct Products {
  Precision h;
  Rooms r;
  vk::View weight;
};

Products products_for(vk::Commands& cmd, const Conv2dShape& s, vk::View scratch, vk::View weight, Formats f) {
  const Precision h = products_of(cmd, s, f);
  const Rooms r = rooms_of(s, scratch, h);
  return {h, r, is_half(h) ? pack_into(cmd, weight, uint32_t(s.weight_size()), h, r.weight) : weight};
}

// Samples first .. first + count - 1 of dy, as the products read them: packed into the rooms
// for 16-bit products (its view and its first sample at 0), else dy itself from `first`.
std::pair<vk::View, uint32_t> gradient_operand(vk::Commands& cmd, vk::View dy, const Conv2dShape& s,
                                               const Rooms& r, Precision h, uint32_t first, uint32_t count) {
  const uint64_t per = uint64_t(s.oc) * pixels(s);
  if (!is_half(h)) return {dy, first};
  const vk::View chunk(*dy.buffer, dy.offset + first * per * 4, count * per * 4);
  return {pack_into(cmd, chunk, uint32_t(count * per), h, r.dy), 0};
}

// A columns kernel (`name`, built for `format`: im2col's x, col2im's rounding of dx; and
// im2col's columns), specialized for four pixels an invocation or not, the geometry
// (shaders/conv_geometry.glsl) and the formats.
const vk::Kernel& columns_kernel(vk::Commands& cmd, const char* name, const Conv2dShape& s, bool quads,
                                 Precision format, Precision columns = Precision::Fp32) {
  vk::Specialization spec;
  spec.set(0, quads).set(1, s.h).set(2, s.w).set(3, s.out_h()).set(4, s.out_w()).set(5, s.kh);
  spec.set(6, s.kw).set(7, s.stride_h).set(8, s.stride_w).set(9, s.pad_h).set(10, s.pad_w);
  spec.set(11, uint32_t(format)).set(12, uint32_t(columns));
  return cmd.device().kernel(format_kernel(name, {format, columns}), spec);
}

// Columns of samples first .. first + count - 1 from x (stored as `format` says), stored in
// `h`: 16 bits a quad at a time (products_of).
void im2col(vk::Commands& cmd, vk::View x, vk::View columns, const Conv2dShape& s, uint32_t first,
            uint32_t count, Precision format, Precision h) {
  // Four pixels an invocation, stored as one vec4, where every row of columns stays aligned.
  const bool vec4 = quads(pixels(s), {columns});
  BRIGADE_EXPECT(vec4 || !is_half(h), "16-bit columns are stored a quad at a time");
  // Capped: a sample's IC * OH * OW is the model's, and the kernel walks the rest.
  const vk::Groups groups{capped_groups(uint64_t(s.ic) * pixels(s) / (vec4 ? 4 : 1), BRIGADE_WG_CONV).x, 1, count};
  require_groups(groups, s, "columns", {});
  const shaders::Conv2dColumnsPush push{push_of(s), first, count};
  cmd.dispatch(columns_kernel(cmd, "conv2d_im2col", s, vec4, format, h), {x, columns}, push, groups);
}

// dx of samples first .. first + count - 1 += what their columns' gradients gather, rounded
// to `round`.
void col2im(vk::Commands& cmd, vk::View columns, vk::View dx, const Conv2dShape& s, uint32_t first,
            uint32_t count, Precision round) {
  // Four elements an invocation, added as one vec4, where every plane of dx stays aligned.
  const bool vec4 = quads(uint64_t(s.h) * s.w, {dx});
  // Capped: a sample's IC * H * W is the model's, and the kernel walks the rest.
  const vk::Groups groups{capped_groups(uint64_t(s.ic) * s.h * s.w / (vec4 ? 4 : 1), BRIGADE_WG_CONV).x, 1, count};
  require_groups(groups, s, "columns' gradient", {});
  const shaders::Conv2dColumnsPush push{push_of(s), first, count};
  cmd.dispatch(columns_kernel(cmd, "conv2d_col2im", s, vec4, round), {columns, dx}, push, groups);
}

// dweight += sum over the samples of dy[n] . columns[n]^T (see conv2d_backward_weight).
void matrix_backward_weight(vk::Commands& cmd, vk::View dy, vk::View x, vk::View dweight,
                            const Conv2dShape& s, vk::View scratch, Formats f) {
  const uint32_t K = taps(s), P = pixels(s);
  const Precision h = products_of(cmd, s, f);
  const Rooms r = rooms_of(s, scratch, h);
  const MatmulTiling t = matmul_tiling(cmd.device().info(), s.oc, K);
  const uint64_t tiles = uint64_t(vk::groups_for(K, t.wg_x * t.tn)) * vk::groups_for(s.oc, t.wg_y * t.tm);
  const uint64_t stride = padded(s.weight_size());
  for (uint32_t first = 0; first < s.n; first += r.chunk) {
    const uint32_t count = std::min(r.chunk, s.n - first);
    im2col(cmd, x, r.columns, s, first, count, f.x, h);
    const auto [grad, grad_first] = gradient_operand(cmd, dy, s, r, h, first, count);
    // The chunk's samples are the terms of one sum, added in order after what dweight holds;
    // or, for a weight of few tiles, summed in equal groups side by side (as many groups as
    // divide the chunk, up to kGroups), which are then added to dweight in order.
    uint32_t groups = 1;
    if (partial_floats(s) && tiles < kGroups)
      for (uint32_t g = std::min(count, kGroups); g > 1 && groups == 1; --g)
        if (count % g == 0) groups = g;
    MatmulParams mm{.M = s.oc, .N = K, .K = P, .trans_b = true, .accumulate = groups == 1,
                    .batch = groups, .terms = count / groups, .a_format = h, .b_format = h};
    mm.stride_a = s.oc * P, mm.stride_b = K * P, mm.offset_a = grad_first * s.oc * P;
    if (groups == 1) {
      matmul(cmd, grad, r.columns, dweight, mm);
      continue;
    }
    mm.stride_c = uint32_t(stride);
    const vk::View partials(*r.partials.buffer, r.partials.offset, groups * stride * 4);
    matmul(cmd, grad, r.columns, partials, mm);
    // The groups added to dweight in order, in one dispatch.
    const shaders::AxpyPush push{uint32_t(s.weight_size()), 1.0f, groups, uint32_t(stride)};
    cmd.dispatch(cmd.device().kernel("axpy"), {partials, dweight}, push,
                 {vk::groups_for(s.weight_size(), BRIGADE_WG_1D)});
  }
}


// The form a pass runs: `chosen`, else the device's (conv2d_form). A 16-bit tensor has no direct form, and
// Winograd's stores a 16-bit output two of a row at a time.
Form form_of(const vk::Commands& cmd, std::optional<Form> chosen, const Conv2dShape& s, Formats f) {
  const Form form = chosen.value_or(conv2d_form(cmd.device().info(), s, f.x));
  BRIGADE_EXPECT(form != Form::Winograd || winograd::fits(s),
                 "conv2d's Winograd form takes 3x3 kernels at stride 1 with padding at most 2 only");
  BRIGADE_EXPECT(!(is_half(f.x) || is_half(f.y)) || form != Form::Direct,
                 "conv2d's direct form reads and writes fp32 only");
  BRIGADE_EXPECT(!is_half(f.y) || form != Form::Winograd || winograd::stores_half(s),
                 "conv2d's Winograd form stores a 16-bit output of even width only");
  return form;
}

}  // namespace

bool conv2d_matrix_units(const vk::PhysicalInfo& device, const Conv2dShape& s, Precision x) {
  return is_half(x) && pixels(s) % 4 == 0 && default_matrix_tiling(device, x);
}

Form conv2d_form(const vk::PhysicalInfo& device, const Conv2dShape& s, Precision x) {
  const Form form = form_for(device);
  return form == Form::Matrix && winograd::pays(s) && !conv2d_matrix_units(device, s, x) ? Form::Winograd : form;
}

bool conv2d_stores_half(const vk::PhysicalInfo& device, const Conv2dShape& s) {
  // Winograd's form where it pays on an fp32 x: its even width holds the matrix form's even
  // pixel count too.
  switch (conv2d_form(device, s)) {
    case Form::Winograd: return winograd::stores_half(s);
    case Form::Matrix: return matmul_stores_half(device, pixels(s));
    default: return false;
  }
}

uint64_t conv2d_scratch_per_sample(const Conv2dShape& s) {
  const uint64_t columns = columns_per_sample(s);
  return winograd::pays(s) ? std::max(columns, winograd::floats_per_sample(s)) : columns;
}

uint64_t conv2d_scratch_floats(const Conv2dShape& s, uint32_t samples, Precision stored) {
  // 16-bit products (products_of) also take the packed weight and output gradients.
  const uint64_t columns = matrix_floats(s, samples, is_half(stored) && pixels(s) % 4 == 0);
  return winograd::pays(s) ? std::max(columns, winograd::scratch_floats(s, samples)) : columns;
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
                    vk::View y, const Conv2dShape& s, vk::View scratch,
                    std::optional<Form> method, Formats f) {
  conv2d_validate(s);
  BRIGADE_EXPECT_BYTES(x, stored_bytes(s.x_size(), f.x), "conv2d input");
  BRIGADE_EXPECT_FLOATS(weight, s.weight_size(), "conv2d weight");
  if (bias) BRIGADE_EXPECT_FLOATS(*bias, s.oc, "conv2d bias");
  BRIGADE_EXPECT_BYTES(y, stored_bytes(s.y_size(), f.y), "conv2d output");
  const Form form = form_of(cmd, method, s, f);
  if (form == Form::Direct) return direct::forward(cmd, x, weight, bias, y, s);
  if (form == Form::Winograd) return winograd::forward(cmd, x, weight, bias, y, s, scratch, f);
  const uint32_t K = taps(s), P = pixels(s);
  const auto [h, r, w] = products_for(cmd, s, scratch, weight, f);
  for (uint32_t first = 0; first < s.n; first += r.chunk) {
    const uint32_t count = std::min(r.chunk, s.n - first);
    im2col(cmd, x, r.columns, s, first, count, f.x, h);
    MatmulParams mm{.M = s.oc, .N = P, .K = K, .batch = count, .bias_rows = true, .a_format = h, .b_format = h,
                    .c_format = f.y};
    mm.stride_b = K * P, mm.stride_c = s.oc * P, mm.offset_c = first * s.oc * P;
    matmul(cmd, w, r.columns, y, mm, bias);
  }
}

void conv2d_backward_bias(vk::Commands& cmd, vk::View dy, vk::View dbias, const Conv2dShape& s,
                          std::optional<vk::View> codes, uint32_t tile) {
  require_groups({s.oc}, s, "backward-bias", {"use fewer output channels"});
  const uint64_t plane = codes ? (s.out_h() / 2) * (s.out_w() / 2) : pixels(s);
  const bool vec4 = !codes && quads(plane, {dy});
  vk::Specialization spec = reduction_spec(cmd.device(), uint64_t(s.n) * plane / (vec4 ? 4 : 1));
  spec.set(1, vec4).set(2, codes ? tile : 0u);
  cmd.dispatch(cmd.device().kernel("conv2d_backward_bias", spec), {dy, dbias, codes.value_or(dy)}, push_of(s),
               {s.oc});
}

namespace {

// The views a backward pass binds (those given), each against the shape.
void expect_backward(const Conv2dShape& s, vk::View dy, std::optional<vk::View> x, std::optional<vk::View> weight,
                     std::optional<vk::View> dx, std::optional<vk::View> dweight, std::optional<vk::View> dbias,
                     Formats f) {
  conv2d_validate(s);
  BRIGADE_EXPECT_FLOATS(dy, s.y_size(), "conv2d output gradient");
  if (x) BRIGADE_EXPECT_BYTES(*x, stored_bytes(s.x_size(), f.x), "conv2d input");
  if (weight) BRIGADE_EXPECT_FLOATS(*weight, s.weight_size(), "conv2d weight");
  if (dx) BRIGADE_EXPECT_FLOATS(*dx, s.x_size(), "conv2d input gradient");
  if (dweight) BRIGADE_EXPECT_FLOATS(*dweight, s.weight_size(), "conv2d weight gradient");
  if (dbias) BRIGADE_EXPECT_FLOATS(*dbias, s.oc, "conv2d bias gradient");
}

}  // namespace

void conv2d_backward_data(vk::Commands& cmd, vk::View dy, vk::View weight, vk::View dx,
                          const Conv2dShape& s, vk::View scratch,
                          std::optional<Form> method, Formats f) {
  expect_backward(s, dy, {}, weight, dx, {}, {}, f);
  const Form form = form_of(cmd, method, s, f);
  if (form == Form::Direct) return direct::backward_data(cmd, dy, weight, dx, s);
  if (form == Form::Winograd) return winograd::backward(cmd, dy, {dx, weight, {}, {}}, s, scratch, f.x);
  const uint32_t K = taps(s), P = pixels(s);
  const auto [h, r, w] = products_for(cmd, s, scratch, weight, f);
  for (uint32_t first = 0; first < s.n; first += r.chunk) {
    const uint32_t count = std::min(r.chunk, s.n - first);
    const auto [grad, grad_first] = gradient_operand(cmd, dy, s, r, h, first, count);
    MatmulParams mm{.M = K, .N = P, .K = s.oc, .trans_a = true, .batch = count, .a_format = h, .b_format = h};
    mm.stride_b = s.oc * P, mm.stride_c = K * P, mm.offset_b = grad_first * s.oc * P;
    matmul(cmd, w, grad, r.columns, mm);
    col2im(cmd, r.columns, dx, s, first, count, f.x);
  }
}

void conv2d_backward_weight(vk::Commands& cmd, vk::View dy, vk::View x, vk::View dweight,
                            std::optional<vk::View> dbias, const Conv2dShape& s,
                            vk::View scratch, std::optional<Form> method, Formats f) {
  expect_backward(s, dy, x, {}, {}, dweight, dbias, f);
  const Form form = form_of(cmd, method, s, f);
  if (form == Form::Direct) direct::backward_weight(cmd, dy, x, dweight, s);
  else if (form == Form::Winograd) winograd::backward(cmd, dy, {{}, {}, dweight, x}, s, scratch, f.x);
  else matrix_backward_weight(cmd, dy, x, dweight, s, scratch, f);
  if (dbias) conv2d_backward_bias(cmd, dy, *dbias, s);
}

void conv2d_backward(vk::Commands& cmd, vk::View dy, vk::View x, vk::View weight, std::optional<vk::View> dx,
                     std::optional<vk::View> dweight, std::optional<vk::View> dbias, const Conv2dShape& s,
                     vk::View scratch, std::optional<Form> method, Formats f) {
  BRIGADE_EXPECT(dweight || !dbias, "conv2d's bias gradient comes with the weight gradient");
  if (dx && dweight && form_of(cmd, method, s, f) == Form::Winograd) {
    expect_backward(s, dy, x, weight, dx, dweight, dbias, f);
    winograd::backward(cmd, dy, {dx, weight, dweight, x}, s, scratch, f.x);
    if (dbias) conv2d_backward_bias(cmd, dy, *dbias, s);
    return;
  }
  if (dweight) conv2d_backward_weight(cmd, dy, x, *dweight, dbias, s, scratch, method, f);
  if (dx) conv2d_backward_data(cmd, dy, weight, *dx, s, scratch, method, f);
}

}  // namespace brigade::ops
