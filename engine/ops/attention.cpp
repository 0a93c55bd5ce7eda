#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>

#include "ops/attention_tiles.h"
#include "ops/launch_geometry.h"
#include "ops/matmul_tiles.h"
#include "ops/matmul.h"
// Angle brackets: a quoted name would find ops/attention.h beside this file, not the
// shader header in shaders/.
#include "shaders/attention.h"
#include "util/error.h"

namespace brigade::ops {
namespace {

using Causal = MatmulParams::Causal;
using shaders::AttentionPush;
using shaders::AttentionSoftmaxPush;

// Scratch regions start 256 bytes apart at least (Vulkan's largest
// minStorageBufferOffsetAlignment), so each is a valid view wherever the scratch starts.
constexpr uint64_t kAlignFloats = 64;
uint64_t pad(uint64_t floats) { return (floats + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

// Head size, after checking the shape a model configuration could get wrong.
uint32_t head_size(uint32_t C, uint32_t NH) {
  if (NH == 0 || C == 0 || C % NH != 0)
    throw UserError("attention: the embedding width C=" + std::to_string(C) +
                    " must be a positive multiple of the number of heads NH=" + std::to_string(NH));
  return C / NH;
}

// The matrix form works through the batch indices z = b*NH + h in chunks of n: whole samples
// (n a multiple of NH), or, where one sample's heads do not fit the scratch or a dispatch's
// grid, heads of one sample. A chunk's scratch, in floats: its n (T,T) scores, and in backward
// their gradient beside them; where the products read 16 bits (`half`), after them the packed
// copies of P (and in backward dS, then dy's rows of the samples the chunk spans).
uint64_t samples_spanned(uint64_t n, uint32_t NH) { return std::max<uint64_t>(1, n / NH); }
uint64_t scores(uint64_t n, uint32_t T) { return pad(n * T * T); }
uint64_t packed_scores(uint64_t n, uint32_t T) { return pad((n * T * T + 1) / 2); }
uint64_t packed_rows(uint64_t samples, uint32_t T, uint32_t C) { return pad((samples * T * C + 1) / 2); }
uint64_t scratch_of(uint64_t n, uint32_t T, uint32_t C, uint32_t NH, bool backward, bool half) {
  const uint64_t packed = !half     ? 0
                          : backward ? 2 * packed_scores(n, T) + packed_rows(samples_spanned(n, NH), T, C)
                                     : packed_scores(n, T);
  return (backward ? 2 : 1) * scores(n, T) + packed;
}

// Whether the matrix form's products read 16-bit operands only: qkv and y in one 16-bit type.
bool packs(Formats f) { return is_half(f.x) && f.y == f.x; }

vk::View sub(vk::View v, uint64_t at, uint64_t floats) {
  return vk::View(*v.buffer, v.offset + at * 4, floats * 4);
}

// Batch indices per chunk: as many as the scratch holds, whole samples where one fits, each
// chunk's scores within what a kernel binds (maxStorageBufferRange) and its batch within a
// dispatch's grid (the products' z, the softmax's y).
uint32_t chunk_heads(const vk::Device& dev, vk::View scratch, uint32_t B, uint32_t T, uint32_t C, uint32_t NH,
                     bool backward, bool half) {
  const uint64_t have = scratch.range / 4, bound = dev.info().max_storage_buffer_range / 4;
  if (uint64_t(T) * T > bound)
    throw UserError("attention: one head's (T,T) scores at T=" + std::to_string(T) + " are over what a kernel of " +
                    dev.label() + " binds (maxStorageBufferRange); the fused form keeps none (BRIGADE_ATTENTION=fused)");
  const auto fits = [&](uint64_t n) { return scratch_of(n, T, C, NH, backward, half) <= have && n * T * T <= bound; };
  BRIGADE_EXPECT(fits(1), "attention scratch of " + std::to_string(have) + " floats is under the " +
                              std::to_string(scratch_of(1, T, C, NH, backward, half)) + " one head needs");
  const auto& grid = dev.info().max_workgroup_count;
  uint64_t most = std::min<uint64_t>({uint64_t(B) * NH, max_groups().load(std::memory_order_relaxed), grid[1], grid[2]});
  // Padding makes scratch_of(k n) <= k scratch_of(n): a first guess that fits, then upwards.
  const auto largest = [&](uint64_t unit, uint64_t units) {
    uint64_t k = std::min<uint64_t>(units, std::max<uint64_t>(1, have / scratch_of(unit, T, C, NH, backward, half)));
    while (k > 1 && !fits(k * unit)) --k;
    while (k < units && fits((k + 1) * unit)) ++k;
    return k * unit;
  };
  if (most >= NH) {
    if (fits(most - most % NH)) return uint32_t(most - most % NH);
    if (fits(NH)) return uint32_t(largest(NH, most / NH));
    most = NH - 1;
  }
  return uint32_t(largest(1, most));
}

// Chunk `z0`'s batch indices: from head `head` of sample `first`, n of them, in a grid of
// `heads` matrices a sample (all NH of whole samples; n of one sample's).
struct Chunk {
  uint32_t first, head, n, heads;
};
Chunk chunk_at(uint64_t z0, uint32_t most, uint32_t B, uint32_t NH) {
  const uint32_t first = uint32_t(z0 / NH), head = uint32_t(z0 % NH);
  const uint32_t n = most >= NH ? uint32_t(std::min<uint64_t>(most, uint64_t(B) * NH - z0)) : std::min(most, NH - head);
  return {first, head, n, std::min(n, NH)};
}

// One operand of the per-head products: a view and where head h of sample b (batch index
// b*NH + h) starts in it.
struct Heads {
  vk::View view;
  uint32_t offset, ld, stride, head_stride;
  Precision format = Precision::Fp32;  // how the view stores it
};

// Part `part` (q, k, v: 0, 1, 2; y and dy: 0 with parts 1) of a token tensor (B,T,parts*C)
// from the chunk's first head on: head h is HS columns at part*C + h*HS of every token row.
Heads token_heads(vk::View v, uint32_t parts, uint32_t part, const Chunk& c, uint32_t T, uint32_t C,
                  uint32_t HS, Precision format = Precision::Fp32) {
  const uint32_t row = parts * C;
  return {v, c.first * T * row + part * C + c.head * HS, row, T * row, HS, format};
}

// The (T,T) scores of the chunk's heads, one after another in the scratch (fp32, or a packed
// copy).
Heads score_heads(vk::View v, uint32_t T, const Chunk& c, Precision format = Precision::Fp32) {
  return {v, 0, T, c.heads * T * T, T * T, format};
}

// `h`'s layout in `room`, where its values lie packed as p (a kernel wrote them so).
Heads packed_heads(const Heads& h, vk::View room, uint64_t elements, Precision p) {
  return {vk::View(*room.buffer, room.offset, stored_bytes(elements, p)), 0, h.ld, h.stride, h.head_stride, p};
}

// `h`'s fp32 values packed into `to` as p (rounded), read where they lay: a packed copy of the
// same layout.
Heads packed(vk::Commands& cmd, const Heads& h, uint64_t elements, vk::View to, Precision p) {
  const vk::View from(*h.view.buffer, h.view.offset + uint64_t(h.offset) * 4, elements * 4);
  pack_into(cmd, from, uint32_t(elements), p, to);
  return packed_heads(h, to, elements, p);
}

// One product per head of the chunk, C[z] (+)= alpha op(A[z]) op(B[z]), each
// operand read or written where it lies (no copies between layouts).
// `causal`: what of the causal mask the product may leave out (ops/matmul.h).
// `copy`: C's copy as well, packed as copy_format in a view laid out as c.view (the same
// offsets in elements; MatmulParams::copy_format).
void per_head(vk::Commands& cmd, const Heads& a, const Heads& b, const Heads& c, uint32_t M,
              uint32_t N, uint32_t K, bool trans_a, bool trans_b, float alpha, bool accumulate,
              const Chunk& chunk, MatmulParams::Causal causal, std::optional<vk::View> copy = {},
              Precision copy_format = Precision::Fp32) {
  MatmulParams p{.M = M, .N = N, .K = K, .trans_a = trans_a, .trans_b = trans_b,
                 .accumulate = accumulate, .alpha = alpha, .batch = chunk.n, .causal = causal};
  p.lda = a.ld, p.ldb = b.ld, p.ldc = c.ld;
  p.offset_a = a.offset, p.offset_b = b.offset, p.offset_c = c.offset;
  p.stride_a = a.stride, p.stride_b = b.stride, p.stride_c = c.stride;
  p.heads = chunk.heads, p.head_stride_a = a.head_stride, p.head_stride_b = b.head_stride,
  p.head_stride_c = c.head_stride;
  p.a_format = a.format, p.b_format = b.format, p.c_format = c.format;
  if (copy) p.copy_format = copy_format;
  ops::matmul(cmd, a.view, b.view, c.view, p, std::nullopt, std::nullopt, copy);
}

// Samples one dispatch of the row kernels takes on z: the grid's limit (lowered by
// ops::max_groups in the tests), the rest in further dispatches from AttentionPush::first.
uint32_t samples_per_dispatch(const vk::Device& dev) {
  return std::max(1u, std::min(max_groups().load(std::memory_order_relaxed), dev.info().max_workgroup_count[2]));
}

// The row kernels (Form::Direct, and staged Form::Fused): straight from the token layouts, no
// scratch but the backward's delta (dy.y per row, (B,NH,T)).
namespace rows {

// The row kernels keep a head's rows in registers.
void check_head_size(uint32_t HS) {
  if (HS > BRIGADE_ATTENTION_MAX_HS)
    throw UserError("attention: head size C/NH=" + std::to_string(HS) + " is over the row kernels' " +
                    "limit of " + std::to_string(BRIGADE_ATTENTION_MAX_HS) + "; use more heads");
}

// Staged (Form::Fused): blocks of BC rows in shared memory, the most of 64, 32, 16 or 8 whose
// two blocks of head rows and two floats a row (the backward's key/value side) fit the
// device's shared memory; a head too large for blocks of 8 runs unstaged.
vk::Specialization spec(const vk::Commands& cmd, bool staged, uint32_t HS, std::initializer_list<vk::View> views) {
  vk::Specialization s;
  s.set(BRIGADE_ATTENTION_SPEC_HS, HS);
  s.set(BRIGADE_ATTENTION_SPEC_VEC4, quads(HS, views));
  if (staged)
    for (uint32_t bc = 64; bc >= 8; bc /= 2)
      if (uint64_t(bc) * (2 * 16 * ((HS + 3) / 4) + 8) <= cmd.device().info().max_shared_memory) {
        s.set(BRIGADE_ATTENTION_SPEC_STAGED, true).set(BRIGADE_ATTENTION_SPEC_BC, bc);
        break;
      }
  return s;
}

// The row kernels read and write fp32 only.
void expect_fp32(Formats f) {
  BRIGADE_EXPECT(!is_half(f.x) && !is_half(f.y), "attention's row kernels take fp32 tensors only");
}

void forward(vk::Commands& cmd, bool staged, vk::View qkv, vk::View y, vk::View lse, uint32_t B, uint32_t T,
             uint32_t C, uint32_t NH, uint32_t HS, Formats f) {
  check_head_size(HS);
  expect_fp32(f);
  const vk::Kernel& kernel = cmd.device().kernel("attention_rows_forward", spec(cmd, staged, HS, {qkv, y}));
  const uint32_t most = samples_per_dispatch(cmd.device());
  for (uint32_t first = 0; first < B; first += most)
    cmd.dispatch(kernel, {qkv, y, lse}, AttentionPush{B, T, C, NH, 1.0f / std::sqrt(float(HS)), first},
                 {vk::groups_for(T, BRIGADE_WG_ATTENTION), NH, std::min(most, B - first)});
}

void backward(vk::Commands& cmd, bool staged, vk::View qkv, vk::View y, vk::View lse, vk::View dy, vk::View dqkv,
              vk::View scratch, uint32_t B, uint32_t T, uint32_t C, uint32_t NH, uint32_t HS, Formats f) {
  check_head_size(HS);
  expect_fp32(f);
  const uint64_t rows = uint64_t(B) * T * NH;
  BRIGADE_EXPECT(scratch.range / 4 >= rows, "attention scratch of " + std::to_string(scratch.range / 4) +
                                               " floats is under the row kernels' delta of " + std::to_string(rows));
  const vk::View delta = sub(scratch, 0, rows);
  const vk::Specialization s = spec(cmd, staged, HS, {qkv, y, dy, dqkv});
  const uint32_t most = samples_per_dispatch(cmd.device());
  // dq first: it also writes delta, which the key/value pass reads (a barrier follows).
  const vk::Kernel& query = cmd.device().kernel("attention_rows_backward_query", s);
  const vk::Kernel& key_value = cmd.device().kernel("attention_rows_backward_key_value", s);
  for (const bool dq : {true, false})
    for (uint32_t first = 0; first < B; first += most) {
      const AttentionPush p{B, T, C, NH, 1.0f / std::sqrt(float(HS)), first};
      const vk::Groups groups{vk::groups_for(T, BRIGADE_WG_ATTENTION), NH, std::min(most, B - first)};
      if (dq) cmd.dispatch(query, {qkv, y, lse, dy, dqkv, delta}, p, groups);
      else cmd.dispatch(key_value, {qkv, lse, dy, dqkv, delta}, p, groups);
    }
}

}  // namespace rows

// The forward's tensors over `rows` = B*T tokens, which the backward reads again.
void expect_forward_views(vk::View qkv, vk::View y, vk::View lse, uint64_t rows, uint32_t C,
                          uint32_t NH, Formats f) {
  BRIGADE_EXPECT_BYTES(qkv, stored_bytes(rows * 3 * C, f.x), "attention qkv");
  BRIGADE_EXPECT_BYTES(y, stored_bytes(rows * C, f.y), "attention y");
  BRIGADE_EXPECT_FLOATS(lse, rows * NH, "attention lse");
}

// The form where the caller names none.
Form default_form(const vk::PhysicalInfo& device, Precision stored) {
  return attention_form_for(is_half(stored) && default_matrix_tiling(device, stored).has_value());
}

}  // namespace

std::string attention_path(const vk::PhysicalInfo& device, Precision stored) {
  const Form form = default_form(device, stored);
  if (form == Form::Direct) return "attention on the row kernels, a query or key row an invocation";
  if (form == Form::Matrix)
    return "attention in the matrix form: its products on the matrix kernel, the (T,T) scores in the scratch";
  if (!is_half(stored)) return "attention fused: flash attention on SIMT cores (the row kernels staged)";
  const std::optional<MatmulTiling> m = default_matrix_tiling(device, stored);
  if (!m)
    return std::string("attention in the matrix form: fused, ") + precision_name(stored) +
           " attention takes matrix tiles only where the stage's products take the device's matrix units";
  const AttentionTiling t = attention_tiling(*m);
  return "attention fused: flash attention on " + t.name() + " for heads of a multiple of " +
         std::to_string(heads_multiple(t)) + " elements, the matrix form for others";
}

bool attention_takes_tiles(const vk::PhysicalInfo& device, Precision stored, uint32_t HS) {
  return is_half(stored) && default_form(device, stored) == Form::Fused && attention_tiling(device, stored, HS).has_value();
}

uint64_t attention_scratch_floats(uint32_t samples, uint32_t T, uint32_t C, uint32_t NH, Precision stored) {
  head_size(C, NH);
  return scratch_of(uint64_t(samples) * NH, T, C, NH, true, is_half(stored));
}

uint64_t attention_scratch_within(uint32_t B, uint32_t T, uint32_t C, uint32_t NH, Precision stored, uint64_t cap_bytes) {
  head_size(C, NH);
  const bool half = is_half(stored);
  const uint64_t sample = scratch_of(NH, T, C, NH, true, half) * 4, head = scratch_of(1, T, C, NH, true, half) * 4;
  if (sample <= cap_bytes) return scratch_of(std::clamp<uint64_t>(cap_bytes / sample, 1, std::max(B, 1u)) * NH, T, C, NH, true, half);
  return scratch_of(std::clamp<uint64_t>(cap_bytes / head, 1, NH), T, C, NH, true, half);
}

void attention_forward(vk::Commands& cmd, vk::View qkv, vk::View y, vk::View lse,
                       vk::View scratch, uint32_t B, uint32_t T, uint32_t C, uint32_t NH,
                       std::optional<Form> form, Formats f) {
  const uint32_t HS = head_size(C, NH);
  expect_forward_views(qkv, y, lse, uint64_t(B) * T, C, NH, f);
  if (B == 0 || T == 0) return;
  const bool half = packs(f);
  // The fused form on 16-bit tensors: flash attention on matrix tiles where the device has
  // them (and the backward the scratch for its delta), the matrix form elsewhere (the row
  // kernels read fp32 only).
  const Form chosen = form.value_or(default_form(cmd.device().info(), f.x));
  if (chosen == Form::Fused && half)
    if (const auto t = attention_tiling(cmd.device().info(), f.x, HS); t && qkv.offset % 16 == 0)
      return attention_tiles_forward(cmd, *t, qkv, y, lse, B, T, C, NH, f.x);
  if (chosen == Form::Direct || (chosen == Form::Fused && !half))
    return rows::forward(cmd, chosen == Form::Fused, qkv, y, lse, B, T, C, NH, HS, f);
  const float scale = 1.0f / std::sqrt(float(HS));
  const uint32_t most = chunk_heads(cmd.device(), scratch, B, T, C, NH, false, half);
  for (uint64_t z = 0; z < uint64_t(B) * NH; z += chunk_at(z, most, B, NH).n) {
    const Chunk c = chunk_at(z, most, B, NH);
    const uint32_t n = c.n;
    const uint64_t r = scores(n, T);
    const Heads q = token_heads(qkv, 3, 0, c, T, C, HS, f.x), k = token_heads(qkv, 3, 1, c, T, C, HS, f.x),
                v = token_heads(qkv, 3, 2, c, T, C, HS, f.x), yh = token_heads(y, 1, 0, c, T, C, HS, f.y),
                s = score_heads(sub(scratch, 0, r), T, c);
    per_head(cmd, q, k, s, T, T, HS, false, true, scale, false, c, Causal::SkipAbove);  // S = scale Q K^T
    // With quads, the softmax itself writes P packed where the product reads it.
    const uint64_t elements = uint64_t(n) * T * T;
    const vk::View room = sub(scratch, r, packed_scores(n, T));
    const bool vec4 = quads(T, {s.view}), direct = half && vec4;
    const Precision to = direct ? f.x : Precision::Fp32;
    const vk::Specialization softmax =
        vk::Specialization().set(BRIGADE_ATTENTION_SPEC_VEC4, vec4).set(BRIGADE_ATTENTION_SPEC_FORMAT_P, uint32_t(to));
    const AttentionSoftmaxPush push{n, T, NH, HS, c.first, c.head};
    const vk::Groups groups{vk::groups_for(T, BRIGADE_WG_ATTENTION_ROWS), n, 1};
    const vk::Kernel& kernel = cmd.device().kernel(format_kernel("attention_softmax", {to}), softmax);
    if (direct) cmd.dispatch(kernel, {s.view, lse, room}, push, groups);
    else cmd.dispatch(kernel, {s.view, lse}, push, groups);
    const Heads p = direct ? packed_heads(s, room, elements, f.x)
                    : half ? packed(cmd, s, elements, room, f.x) : s;
    per_head(cmd, p, v, yh, T, HS, T, false, false, 1.0f, false, c, Causal::KToRow);  // Y = P V
  }
}

void attention_backward(vk::Commands& cmd, vk::View qkv, vk::View y, vk::View lse, vk::View dy,
                        vk::View dqkv, vk::View scratch, uint32_t B, uint32_t T, uint32_t C,
                        uint32_t NH, std::optional<Form> form, Formats f, PackedGradients copies) {
  const uint32_t HS = head_size(C, NH);
  const uint64_t rows = uint64_t(B) * T;
  expect_forward_views(qkv, y, lse, rows, C, NH, f);
  BRIGADE_EXPECT_FLOATS(dy, rows * C, "attention dy");
  BRIGADE_EXPECT_FLOATS(dqkv, rows * 3 * C, "attention dqkv");
  BRIGADE_EXPECT(is_half(f.x) || (!copies.dy && !copies.dqkv), "attention's packed gradients are of 16-bit qkv");
  if (copies.dy) BRIGADE_EXPECT_BYTES(*copies.dy, stored_bytes(rows * C, f.x), "attention's packed dy");
  if (copies.dqkv) BRIGADE_EXPECT_BYTES(*copies.dqkv, stored_bytes(rows * 3 * C, f.x), "attention's packed dqkv");
  if (B == 0 || T == 0) return;
  const bool half = packs(f);
  const Form chosen = form.value_or(default_form(cmd.device().info(), f.x));
  if (chosen == Form::Fused && half)
    if (const auto t = attention_tiling(cmd.device().info(), f.x, HS);
        t && qkv.offset % 16 == 0 && dy.offset % 16 == 0 && scratch.range / 4 >= rows * NH) {
      attention_tiles_backward(cmd, *t, qkv, y, lse, dy, dqkv, sub(scratch, 0, rows * NH), B, T, C, NH, f.x,
                               copies.dqkv);
      return;
    }
  if (chosen == Form::Direct || (chosen == Form::Fused && !half)) {
    rows::backward(cmd, chosen == Form::Fused, qkv, y, lse, dy, dqkv, scratch, B, T, C, NH, HS, f);
    // The row kernels write no copy of dqkv: packed after them.
    if (copies.dqkv) pack_into(cmd, dqkv, uint32_t(rows * 3 * C), f.x, *copies.dqkv);
    return;
  }
  const float scale = 1.0f / std::sqrt(float(HS));
  const uint32_t most = chunk_heads(cmd.device(), scratch, B, T, C, NH, true, half);
  for (uint64_t z = 0; z < uint64_t(B) * NH; z += chunk_at(z, most, B, NH).n) {
    const Chunk c = chunk_at(z, most, B, NH);
    const uint32_t n = c.n;
    const uint64_t r = scores(n, T), pr = packed_scores(n, T), elements = uint64_t(n) * T * T;
    const auto part = [&](vk::View v, uint32_t i, Precision p) { return token_heads(v, 3, i, c, T, C, HS, p); };
    const Heads q = part(qkv, 0, f.x), k = part(qkv, 1, f.x), v = part(qkv, 2, f.x), dq = part(dqkv, 0, Precision::Fp32),
                dk = part(dqkv, 1, Precision::Fp32), dv = part(dqkv, 2, Precision::Fp32), dyh = token_heads(dy, 1, 0, c, T, C, HS),
                s = score_heads(sub(scratch, 0, r), T, c), ds = score_heads(sub(scratch, r, r), T, c);
    // The packed copies (16-bit products): dy's rows of the samples the chunk spans (the
    // caller's, or packed here), then P and dS once the softmax's backward has made them.
    const uint64_t spanned = samples_spanned(n, NH);
    Heads dyp = dyh;
    if (half && copies.dy) dyp = token_heads(*copies.dy, 1, 0, c, T, C, HS, f.x);
    else if (half) {
      dyp = packed(cmd, token_heads(dy, 1, 0, {c.first, 0, n, c.heads}, T, C, HS), spanned * T * C,
                   sub(scratch, 2 * r + 2 * pr, packed_rows(spanned, T, C)), f.x);
      dyp.offset = c.head * HS;
    }
    per_head(cmd, q, k, s, T, T, HS, false, true, scale, false, c, Causal::SkipAbove);    // S = scale Q K^T
    per_head(cmd, dyp, v, ds, T, T, HS, false, true, 1.0f, false, c, Causal::SkipAbove);  // dP = dY V^T
    const bool vec4 = HS % 4 == 0 && quads(T, {s.view, ds.view, dy, y}), direct = half && vec4;
    const vk::View p_room = sub(scratch, 2 * r, pr), ds_room = sub(scratch, 2 * r + pr, pr);
    const Precision to = direct ? f.x : Precision::Fp32;
    const vk::Kernel& kernel = cmd.device().kernel(format_kernel("attention_softmax_backward", {f.y, to}),
                                             vk::Specialization().set(BRIGADE_ATTENTION_SPEC_VEC4, vec4)
                                                 .set(BRIGADE_ATTENTION_SPEC_FORMAT_Y, uint32_t(f.y))
                                                 .set(BRIGADE_ATTENTION_SPEC_FORMAT_P, uint32_t(to)));
    const AttentionSoftmaxPush push{n, T, NH, HS, c.first, c.head};
    const vk::Groups groups{vk::groups_for(T, BRIGADE_WG_ATTENTION_ROWS), n, 1};
    // Its 16-bit builds bind P's and dS's packed rooms too (s and ds themselves where unused).
    if (is_half(f.y) || direct)
      cmd.dispatch(kernel, {s.view, ds.view, lse, dy, y, direct ? p_room : s.view, direct ? ds_room : ds.view}, push,
                   groups);
    else
      cmd.dispatch(kernel, {s.view, ds.view, lse, dy, y}, push, groups);
    // P and dS are in s and ds now, or packed where the products read them (with quads, the
    // softmax's backward wrote them there); the gradients are written into dqkv where they lie.
    const Heads p = direct ? packed_heads(s, p_room, elements, f.x) : half ? packed(cmd, s, elements, p_room, f.x) : s;
    const Heads dsp = direct ? packed_heads(ds, ds_room, elements, f.x) : half ? packed(cmd, ds, elements, ds_room, f.x) : ds;
    per_head(cmd, p, dyp, dv, T, HS, T, true, false, 1.0f, false, c, Causal::KFromRow, copies.dqkv, f.x);   // dV = P^T dY
    per_head(cmd, dsp, k, dq, T, HS, T, false, false, scale, false, c, Causal::KToRow, copies.dqkv, f.x);   // dQ = scale dS K
    per_head(cmd, dsp, q, dk, T, HS, T, true, false, scale, false, c, Causal::KFromRow, copies.dqkv, f.x);  // dK = scale dS^T Q
  }
}

}  // namespace brigade::ops
