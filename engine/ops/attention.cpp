#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>

#include "ops/launch_geometry.h"
#include "ops/matmul.h"
// Angle brackets: a quoted name would find ops/attention.h beside this file, not the
// shader header in shaders/.
#include "shaders/attention.h"
#include "util/error.h"

namespace brigade::ops {
namespace {

using shaders::AttentionHeadsPush;
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

// The scratch of one chunk of n samples, in floats. Forward: q, k, v heads, y heads, scores.
// Backward: q, k, v heads, dy heads, dq, dk, dv heads, scores (then P), dP (then dS).
struct Regions {
  uint64_t heads;   // one part of the heads layout (n,NH,T,HS)
  uint64_t scores;  // (n,NH,T,T)
  uint64_t forward() const { return 4 * heads + scores; }
  uint64_t backward() const { return 7 * heads + 2 * scores; }
};

Regions regions(uint64_t n, uint32_t T, uint32_t C, uint32_t NH) {
  return {pad(n * T * C), pad(n * NH * T * T)};
}

vk::View sub(vk::View v, uint64_t at, uint64_t floats) {
  return vk::View(*v.buffer, v.offset + at * 4, floats * 4);
}

// Samples per chunk: as many as the scratch holds, at most B, and few enough that the
// matmuls' batch (samples * NH) stays within a dispatch's 65535 workgroups.
uint32_t chunk_samples(vk::View scratch, uint32_t B, uint32_t T, uint32_t C, uint32_t NH,
                       bool backward) {
  const uint64_t have = scratch.range / 4;
  const auto need = [&](uint64_t n) {
    const Regions r = regions(n, T, C, NH);
    return backward ? r.backward() : r.forward();
  };
  BRIGADE_EXPECT(need(1) <= have, "attention scratch of " + std::to_string(have) +
                                      " floats is under the " + std::to_string(need(1)) +
                                      " one sample needs");
  const uint64_t most = std::min<uint64_t>(B, 65535 / NH);
  if (need(most) <= have) return uint32_t(most);
  uint64_t n = std::max<uint64_t>(1, have / need(1));  // padding makes need(n) <= n * need(1)
  while (n < most && need(n + 1) <= have) ++n;
  return uint32_t(n);
}

// Moves `parts` heads tensors between the token layout (B,T,row) and the heads layout.
void move_heads(vk::Commands& cmd, bool scatter, bool accumulate, vk::View tokens, vk::View heads,
                uint32_t parts, uint32_t row, uint64_t part_stride, uint32_t n, uint32_t first,
                uint32_t T, uint32_t NH, uint32_t HS) {
  // part_stride is a multiple of 64 (pad), row one of C and so of HS.
  const bool vec4 = quads(HS, {tokens, heads});
  vk::Specialization spec;
  spec.set(BRIGADE_ATTENTION_SPEC_VEC4, vec4);
  if (scatter) spec.set(BRIGADE_ATTENTION_SPEC_ACCUMULATE, accumulate);
  const AttentionHeadsPush push{n, T, NH, HS, row, uint32_t(part_stride), first};
  cmd.dispatch(cmd.device().kernel(scatter ? "attention_scatter_heads" : "attention_gather_heads", spec),
               {tokens, heads}, push,
               {vk::groups_for(uint64_t(T) * HS / (vec4 ? 4 : 1), BRIGADE_WG_ATTENTION_HEADS), n * NH,
                parts});
}

// One product per head, C[z] (+)= alpha op(A[z]) op(B[z]) for z < n*NH, every operand packed
// per head in the scratch: (T,HS) heads, (T,T) scores.
void per_head(vk::Commands& cmd, vk::View a, vk::View b, vk::View c, uint32_t M, uint32_t N,
              uint32_t K, bool trans_a, bool trans_b, float alpha, uint32_t heads) {
  const auto stride = [](uint32_t rows, uint32_t cols) { return rows * cols; };
  ops::matmul(cmd, a, b, c,
              MatmulParams{.M = M, .N = N, .K = K, .trans_a = trans_a, .trans_b = trans_b,
                           .alpha = alpha, .batch = heads,
                           .stride_a = trans_a ? stride(K, M) : stride(M, K),
                           .stride_b = trans_b ? stride(N, K) : stride(K, N),
                           .stride_c = stride(M, N)});
}

// The row kernels (Form::Direct): straight from the token layouts, no scratch but the
// backward's delta (dy.y per row, (B,NH,T)).
namespace rows {

// The row kernels keep a head's rows in registers.
void check_head_size(uint32_t HS) {
  if (HS > BRIGADE_ATTENTION_MAX_HS)
    throw UserError("attention: head size C/NH=" + std::to_string(HS) + " is over the row kernels' " +
                    "limit of " + std::to_string(BRIGADE_ATTENTION_MAX_HS) + "; use more heads");
}

vk::Specialization spec(uint32_t HS, std::initializer_list<vk::View> views) {
  vk::Specialization s;
  s.set(BRIGADE_ATTENTION_SPEC_HS, HS);
  s.set(BRIGADE_ATTENTION_SPEC_VEC4, quads(HS, views));
  return s;
}

void forward(vk::Commands& cmd, vk::View qkv, vk::View y, vk::View lse, uint32_t B, uint32_t T,
             uint32_t C, uint32_t NH, uint32_t HS) {
  check_head_size(HS);
  cmd.dispatch(cmd.device().kernel("attention_rows_forward", spec(HS, {qkv, y})), {qkv, y, lse},
               AttentionPush{B, T, C, NH, 1.0f / std::sqrt(float(HS))},
               {vk::groups_for(T, BRIGADE_WG_ATTENTION), NH, B});
}

void backward(vk::Commands& cmd, vk::View qkv, vk::View y, vk::View lse, vk::View dy, vk::View dqkv,
              vk::View scratch, uint32_t B, uint32_t T, uint32_t C, uint32_t NH, uint32_t HS) {
  check_head_size(HS);
  const uint64_t rows = uint64_t(B) * T * NH;
  BRIGADE_EXPECT(scratch.range / 4 >= rows, "attention scratch of " + std::to_string(scratch.range / 4) +
                                               " floats is under the row kernels' delta of " + std::to_string(rows));
  const vk::View delta = sub(scratch, 0, rows);
  const vk::Specialization s = spec(HS, {qkv, y, dy, dqkv});
  const AttentionPush p{B, T, C, NH, 1.0f / std::sqrt(float(HS))};
  const vk::Groups groups{vk::groups_for(T, BRIGADE_WG_ATTENTION), NH, B};
  // dq first: it also writes delta, which the key/value pass reads (a barrier follows).
  cmd.dispatch(cmd.device().kernel("attention_rows_backward_query", s), {qkv, y, lse, dy, dqkv, delta}, p, groups);
  cmd.dispatch(cmd.device().kernel("attention_rows_backward_key_value", s), {qkv, lse, dy, dqkv, delta}, p, groups);
}

}  // namespace rows

// The forward's tensors over `rows` = B*T tokens, which the backward reads again.
void expect_forward_views(vk::View qkv, vk::View y, vk::View lse, uint64_t rows, uint32_t C,
                          uint32_t NH) {
  BRIGADE_EXPECT_FLOATS(qkv, rows * 3 * C, "attention qkv");
  BRIGADE_EXPECT_FLOATS(y, rows * C, "attention y");
  BRIGADE_EXPECT_FLOATS(lse, rows * NH, "attention lse");
}

}  // namespace

uint64_t attention_scratch_floats(uint32_t samples, uint32_t T, uint32_t C, uint32_t NH) {
  return regions(samples, T, C, NH).backward();
}

void attention_forward(vk::Commands& cmd, vk::View qkv, vk::View y, vk::View lse,
                       vk::View scratch, uint32_t B, uint32_t T, uint32_t C, uint32_t NH,
                       std::optional<Form> form) {
  const uint32_t HS = head_size(C, NH);
  expect_forward_views(qkv, y, lse, uint64_t(B) * T, C, NH);
  if (B == 0 || T == 0) return;
  if (runs_direct(cmd, form)) return rows::forward(cmd, qkv, y, lse, B, T, C, NH, HS);
  const float scale = 1.0f / std::sqrt(float(HS));
  const uint32_t most = chunk_samples(scratch, B, T, C, NH, false);
  for (uint32_t first = 0; first < B; first += most) {
    const uint32_t n = std::min(most, B - first), heads = n * NH;
    const Regions r = regions(n, T, C, NH);
    const vk::View q = sub(scratch, 0, r.heads), k = sub(scratch, r.heads, r.heads),
                   v = sub(scratch, 2 * r.heads, r.heads), yh = sub(scratch, 3 * r.heads, r.heads),
                   s = sub(scratch, 4 * r.heads, r.scores);
    move_heads(cmd, false, false, qkv, sub(scratch, 0, 3 * r.heads), 3, 3 * C, r.heads, n, first,
               T, NH, HS);
    per_head(cmd, q, k, s, T, T, HS, false, true, scale, heads);  // S = scale Q K^T
    cmd.dispatch(cmd.device().kernel("attention_softmax"), {s, lse},
                 AttentionSoftmaxPush{n, T, NH, HS, first},
                 {vk::groups_for(T, BRIGADE_WG_ATTENTION_ROWS), heads, 1});
    per_head(cmd, s, v, yh, T, HS, T, false, false, 1.0f, heads);  // Y = P V
    move_heads(cmd, true, false, y, yh, 1, C, r.heads, n, first, T, NH, HS);
  }
}

void attention_backward(vk::Commands& cmd, vk::View qkv, vk::View y, vk::View lse, vk::View dy,
                        vk::View dqkv, vk::View scratch, uint32_t B, uint32_t T, uint32_t C,
                        uint32_t NH, std::optional<Form> form) {
  const uint32_t HS = head_size(C, NH);
  const uint64_t rows = uint64_t(B) * T;
  expect_forward_views(qkv, y, lse, rows, C, NH);
  BRIGADE_EXPECT_FLOATS(dy, rows * C, "attention dy");
  BRIGADE_EXPECT_FLOATS(dqkv, rows * 3 * C, "attention dqkv");
  if (B == 0 || T == 0) return;
  if (runs_direct(cmd, form)) return rows::backward(cmd, qkv, y, lse, dy, dqkv, scratch, B, T, C, NH, HS);
  const float scale = 1.0f / std::sqrt(float(HS));
  const uint32_t most = chunk_samples(scratch, B, T, C, NH, true);
  for (uint32_t first = 0; first < B; first += most) {
    const uint32_t n = std::min(most, B - first), heads = n * NH;
    const Regions r = regions(n, T, C, NH);
    const uint64_t h = r.heads;
    const vk::View q = sub(scratch, 0, h), k = sub(scratch, h, h), v = sub(scratch, 2 * h, h),
                   dyh = sub(scratch, 3 * h, h), dq = sub(scratch, 4 * h, h),
                   dk = sub(scratch, 5 * h, h), dv = sub(scratch, 6 * h, h),
                   s = sub(scratch, 7 * h, r.scores), ds = sub(scratch, 7 * h + r.scores, r.scores);
    move_heads(cmd, false, false, qkv, sub(scratch, 0, 3 * h), 3, 3 * C, h, n, first, T, NH, HS);
    move_heads(cmd, false, false, dy, dyh, 1, C, h, n, first, T, NH, HS);
    per_head(cmd, q, k, s, T, T, HS, false, true, scale, heads);     // S = scale Q K^T
    per_head(cmd, dyh, v, ds, T, T, HS, false, true, 1.0f, heads);   // dP = dY V^T
    cmd.dispatch(cmd.device().kernel("attention_softmax_backward"), {s, ds, lse, dy, y},
                 AttentionSoftmaxPush{n, T, NH, HS, first},
                 {vk::groups_for(T, BRIGADE_WG_ATTENTION_ROWS), heads, 1});
    // s holds P and ds holds dS now.
    per_head(cmd, s, dyh, dv, T, HS, T, true, false, 1.0f, heads);   // dV = P^T dY
    per_head(cmd, ds, k, dq, T, HS, T, false, false, scale, heads);  // dQ = scale dS K
    per_head(cmd, ds, q, dk, T, HS, T, true, false, scale, heads);   // dK = scale dS^T Q
    move_heads(cmd, true, true, dqkv, sub(scratch, 4 * h, 3 * h), 3, 3 * C, h, n, first, T, NH,
               HS);
  }
}

}  // namespace brigade::ops
