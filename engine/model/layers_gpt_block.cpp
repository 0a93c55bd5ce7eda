// GptAttention and GptMlp (engine/model/layers.h): nanoGPT's transformer Block as two layers,
// composed from the ops of engine/ops. What the backward pass needs is saved per token; forward
// temporaries and the backward pass's internal gradients live in the scratch view, except that
// a split backward keeps the ones its parameter gradients need in t.deferred (other passes
// reuse the scratch before backward_params runs).
#include <algorithm>
#include <array>
#include <cmath>

#include "model/layers.h"
#include "ops/attention.h"
#include "ops/form.h"
#include "ops/layernorm.h"
#include "ops/linear.h"
#include "ops/matmul.h"
#include "ops/residual.h"
#include "util/error.h"

namespace brigade::model {
namespace {

// Parameter indices of each half, in nanoGPT's state_dict order.
enum AttentionParam : size_t { kLn1W, kLn1B, kAttnW, kAttnB, kProjW, kProjB };
enum MlpParam : size_t { kLn2W, kLn2B, kFcW, kFcB, kMlpProjW, kMlpProjB };
// Saved tensor indices; per-token sizes in saved().
enum AttentionSaved : size_t { kLn1, kLn1Mean, kLn1Rstd, kQkv, kAttn, kLse };
enum MlpSaved : size_t { kLn2, kLn2Mean, kLn2Rstd, kFc, kGelu };
// Deferred tensor indices (a split backward): the gradient each parameter group's kernel
// reads. dy feeds c_proj's weight, kLinear the half's other Linear (dqkv: attn.c_attn, dfc:
// mlp.c_fc), kNorm its LayerNorm (dln_1, dln_2); per-token sizes in deferred().
enum Deferred : size_t { kDy, kLinear, kNorm, kDeferredCount };

// What tells a half's two layers apart in the code they share. Its parameter kernels: c_proj's
// weight gradient reads dy and saved tensor `dy_x` (its input, `dy_in` C wide); the other
// Linear's (c_attn's, c_fc's) reads its gradient and saved tensor `linear_x` (its output,
// `linear_out` C wide: the half's widest gradient); the LayerNorm's reads its gradient, the
// half's input and the saved statistics. Weights are params[weight], biases params[weight + 1].
// `attends`: the attention half, whose scratch also holds dattn's packed room and the
// attention kernels' own scratch.
struct Half {
  size_t dy_x, dy_weight;
  uint32_t dy_in;
  size_t linear_x, linear_weight;
  uint32_t linear_out;
  size_t mean, rstd, norm_weight;
  bool attends;
};
constexpr Half kAttentionHalf{kAttn, kProjW, 1, kLn1, kAttnW, 3, kLn1Mean, kLn1Rstd, kLn1W, true};
constexpr Half kMlpHalf{kGelu, kMlpProjW, 4, kLn2, kFcW, 4, kLn2Mean, kLn2Rstd, kLn2W, false};

// Hands out consecutive aligned sub-views of one view.
class Carver {
 public:
  explicit Carver(vk::View v) : view_(v) {}
  vk::View take(uint64_t floats) {
    const uint64_t at = aligned_floats(used_);
    BRIGADE_EXPECT((at + floats) * 4 <= view_.range, "gpt scratch is too small");
    used_ = at + floats;
    return vk::View(*view_.buffer, view_.offset + at * 4, floats * 4);
  }
  vk::View rest() { return take(view_.range / 4 - std::min(view_.range / 4, aligned_floats(used_))); }

 private:
  vk::View view_;
  uint64_t used_ = 0;
};

// The scratch of a half over N tokens of width C, region by region in order: `wide` floats
// (the gradient of its first Linear: dqkv, 3C a token, or dfc, 4C), two of C a token (narrow_a:
// the forward's branch output, then the attention's dattn; narrow_b: dln_1 or dln_2), then in a
// 16-bit stage the rooms its gradients are packed into for the products (operand.h): dy, and
// the wide gradient's (the attention half's dattn too); then the attention kernels' own
// scratch, the rest. A split backward keeps the gradients its parameter kernels read in
// t.deferred instead.
struct Regions {
  std::array<uint64_t, 6> floats{};  // wide, narrow_a, narrow_b, dy room, wide room, dattn room
  uint64_t total() const {
    uint64_t sum = 0;
    for (uint64_t f : floats) sum += aligned_floats(f);
    return sum;
  }
};
Regions regions(uint64_t N, uint64_t C, const Half& half, ops::Precision h) {
  const uint64_t wide = N * C * half.linear_out;
  return {{wide, N * C, N * C, operand_floats(N * C, h), operand_floats(wide, h),
           half.attends ? operand_floats(N * C, h) : 0}};
}
struct Scratch {
  vk::View wide, narrow_a, narrow_b, dy_room, wide_room, dattn_room, attention;
};
// The scratch of a pass of `half` over N tokens, carved from t.scratch. A forward-only cell's
// (Tensors::forward_only) holds the forward's alone: narrow_a, then the attention kernels'.
Scratch carve(const Tensors& t, uint32_t N, uint32_t C, const Half& half) {
  Carver c(*t.scratch);
  if (t.forward_only) {
    const vk::View narrow = c.take(uint64_t(N) * C);
    return {narrow, narrow, narrow, narrow, narrow, narrow, c.rest()};
  }
  const Regions r = regions(N, C, half, t.y_precision);
  Scratch s{c.take(r.floats[0]), c.take(r.floats[1]), c.take(r.floats[2]), c.take(r.floats[3]),
            c.take(r.floats[4]), c.take(r.floats[5]), *t.scratch};
  s.attention = c.rest();
  return s;
}

// The attention scratch (heads' (T,T) scores, which grow with T^2, and in a 16-bit stage their
// packed copies) the half asks for at once: as many samples of `rows` as fit in kAttentionCap
// bytes, else as many heads of one sample, one head at least; the attention launchers work
// through the rest in chunks of that many.
constexpr uint64_t kAttentionCap = 32ull << 20;

// Where a product also writes its result packed (MatmulParams::copy_format): in a stage storing
// 16 bits, a room of the scratch for the gradient as the products read it (operand.h).
struct CopyTo {
  ops::Precision format = ops::Precision::Fp32;
  std::optional<vk::View> room;
};
CopyTo copy_to(vk::View room, ops::Precision h) {
  if (!ops::is_half(h)) return {};
  return {h, room};
}
// `grad` as the products read it once its copy is written: the copy, where there is one.
Operand read_as(const CopyTo& copy, vk::View grad) { return copy.room ? Operand{*copy.room, copy.format} : Operand{grad}; }

// out (rows x cols) = dy (rows x k) weight (k x cols), written rather than accumulated: the
// first contribution to an internal gradient; with `round`, its values rounded to that
// precision (fp32 holding them); with `pre`, times gelu'(pre) (stored as pre_format) in the
// epilogue: the backward through the GELU whose output the Linear read, in the same pass.
// Returns out as the products read it: its packed copy where `copy` has a room.
Operand write_backward_data(vk::Commands& cmd, Operand dy, vk::View weight, vk::View out, uint32_t rows,
                            uint32_t cols, uint32_t k, ops::Precision w_format, const CopyTo& copy = {},
                            ops::Precision round = ops::Precision::Fp32, std::optional<vk::View> pre = std::nullopt,
                            ops::Precision pre_format = ops::Precision::Fp32) {
  using Epilogue = ops::MatmulParams::Epilogue;
  ops::matmul(cmd, dy.view, weight, out,
              ops::MatmulParams{.M = rows, .N = cols, .K = k, .epilogue = pre ? Epilogue::GeluGrad : Epilogue::None,
                                .a_format = dy.format, .b_format = w_format, .c_round = round,
                                .e_format = pre_format, .copy_format = copy.room ? copy.format : ops::Precision::Fp32},
              std::nullopt, pre, copy.room);
  return read_as(copy, out);
}

// dweight += product^T x, where x is a saved tensor (stored as y is); dbias += grad's sums.
void linear_grads(vk::Commands& cmd, const Tensors& t, vk::View grad, Operand product, vk::View x, size_t weight,
                  uint32_t N, uint32_t in, uint32_t out) {
  ops::linear_backward_weight(cmd, product.view, x, t.grads[weight], std::nullopt, N, in, out, std::nullopt,
                              {t.y_precision, product.format});
  ops::linear_bias_backward(cmd, grad, t.grads[weight + 1], N, out);
}

// Accumulates into t.grads the parameter gradients that `grad` (deferred gradient k, `product`
// as the products read it) gives, over N tokens of width C (the widths above in units of C).
void param_grad(vk::Commands& cmd, const Tensors& t, const Half& h, Deferred k, vk::View grad, Operand product,
                uint32_t N, uint32_t C) {
  const auto& s = t.saved;
  switch (k) {
    case kDy: return linear_grads(cmd, t, grad, product, s[h.dy_x], h.dy_weight, N, h.dy_in * C, C);
    case kLinear: return linear_grads(cmd, t, grad, product, s[h.linear_x], h.linear_weight, N, C, h.linear_out * C);
    case kNorm:
      return ops::layernorm_backward_weight(cmd, grad, t.x, s[h.mean], s[h.rstd], t.grads[h.norm_weight],
                                            t.grads[h.norm_weight + 1], N, C, 0, t.x_precision);
    case kDeferredCount: break;
  }
  BRIGADE_EXPECT(false, "a gpt half has no such deferred gradient");
}

// The gradients a half's backward computes and its parameter kernels read: where each lives
// (t.deferred for a split backward, since other passes reuse the scratch before
// backward_params runs) and the point where kernel k can read it. A whole backward records
// the kernel there; a split backward keeps a copy of dy, the one such gradient that is not
// already in t.deferred.
struct ParamGrads {
  const Pass& p;
  const Tensors& t;
  const Half& half;
  uint32_t N, C;
  vk::View kept(Deferred k, vk::View in_scratch) const { return p.split ? t.deferred[k] : in_scratch; }
  void ready(Deferred k, vk::View grad, Operand product) const {
    if (!p.split) param_grad(p.cmd, t, half, k, grad, product, N, C);
    else if (k == kDy) copy_floats(p.cmd, grad, t.deferred[kDy], uint64_t(N) * C);
  }
};

// dy as the products read it: its copy packed by the layer after this one where that one wrote
// it, else packed here into `room` (in a 16-bit stage).
Operand dy_operand(vk::Commands& cmd, const Tensors& t, vk::View dy, uint64_t elements, vk::View room) {
  return t.dy_copy ? Operand{*t.dy_copy, t.y_precision} : operand(cmd, dy, elements, t.y_precision, room);
}

// The second half of a split backward: the parameter kernels a whole backward records, in
// its order, on the gradients the first half kept; the products read dy and the wide
// gradient packed into the scratch's room for it in a 16-bit stage.
void record_deferred(const Pass& p, const Tensors& t, const Half& half, uint32_t N, uint32_t C) {
  BRIGADE_EXPECT(t.deferred.size() == kDeferredCount, "a gpt half's backward_params without its deferred tensors");
  const vk::View room = carve(t, N, C, half).wide_room;
  const uint64_t floats[kDeferredCount] = {uint64_t(N) * C, uint64_t(N) * C * half.linear_out, uint64_t(N) * C};
  for (size_t k = 0; k < kDeferredCount; ++k) {
    const Operand o = k != kNorm ? operand(p.cmd, t.deferred[k], floats[k], t.y_precision, room) : Operand{t.deferred[k]};
    param_grad(p.cmd, t, half, Deferred(k), t.deferred[k], o, N, C);
  }
}

}  // namespace

GptHalf::GptHalf(uint32_t index, uint32_t T, uint32_t C, uint32_t n_head, uint32_t n_layer)
    : ShapedLayer({T, C}, {T, C}), index_(index), T_(T), C_(C), NH_(n_head), n_layer_(n_layer) {
  if (T_ == 0 || C_ == 0 || NH_ == 0 || n_layer_ == 0) throw UserError("gpt block sizes must be positive");
  if (C_ % NH_)
    throw UserError("n_embd " + std::to_string(C_) + " is not divisible by n_head " + std::to_string(NH_));
}

std::string GptHalf::prefix() const { return "transformer.h." + std::to_string(index_) + "."; }
float GptHalf::proj_std() const { return kGptStd / std::sqrt(2.0f * float(n_layer_)); }

// ---- attention: x1 = x + attn.c_proj(attention(attn.c_attn(ln_1(x)))) ----

GptAttention::GptAttention(uint32_t index, uint32_t T, uint32_t C, uint32_t n_head, uint32_t n_layer)
    : GptHalf(index, T, C, n_head, n_layer) {}

std::vector<ParamSpec> GptAttention::params() const {
  const std::string p = prefix();
  const int64_t C = C_;
  const ParamKind Tr = ParamKind::Trainable;
  return {{p + "ln_1.weight", {C}, Tr, Init::Ones},
          {p + "ln_1.bias", {C}, Tr, Init::Zeros},
          {p + "attn.c_attn.weight", {3 * C, C}, Tr, Init::Normal, kGptStd, true},
          {p + "attn.c_attn.bias", {3 * C}, Tr, Init::Zeros},
          {p + "attn.c_proj.weight", {C, C}, Tr, Init::Normal, proj_std(), true},
          {p + "attn.c_proj.bias", {C}, Tr, Init::Zeros}};
}

std::vector<SavedSpec> GptAttention::saved() const {
  const uint64_t T = T_, C = C_;
  return {{"ln_1", T * C},     {"ln_1.mean", T, 0, true}, {"ln_1.rstd", T, 0, true},
          {"qkv", T * 3 * C}, {"attn", T * C},           {"lse", T * NH_, 0, true}};
}

std::vector<SavedSpec> GptAttention::deferred() const {
  const uint64_t T = T_, C = C_;
  return {{"dy", T * C}, {"dqkv", T * 3 * C}, {"dln_1", T * C}};
}

namespace {

// The attention kernels' part: the row kernels (attention fused or direct on fp32 tensors:
// ops/attention.h) keep no (T,T) scores either, their backward takes B*NH*T floats for delta.
// The same in a forward-only cell, so that its attention works through the samples in the
// chunks a training cell's does (the same bits).
uint64_t attention_floats(uint32_t rows, uint32_t T, uint32_t C, uint32_t NH, ops::Precision stored, bool lean) {
  const bool row_kernels = !ops::is_half(stored) && ops::attention_form_for() != ops::Form::Matrix;
  return lean || row_kernels ? uint64_t(rows) * T * NH : ops::attention_scratch_within(rows, T, C, NH, stored, kAttentionCap);
}

}  // namespace

uint64_t GptAttention::scratch_floats(uint32_t rows, ops::Precision stored, bool lean) const {
  return regions(uint64_t(rows) * T_, C_, kAttentionHalf, stored).total() + attention_floats(rows, T_, C_, NH_, stored, lean) +
         kAlignFloats;
}

// The branch's output, then the attention kernels' part (carve).
uint64_t GptAttention::forward_scratch_floats(uint32_t rows, ops::Precision stored, bool lean) const {
  return aligned_floats(uint64_t(rows) * T_ * C_) + attention_floats(rows, T_, C_, NH_, stored, lean) + kAlignFloats;
}

// Flash attention on matrix tiles keeps no (T,T) scores: its backward takes B*NH*T floats of
// the scratch for delta, the forward none.
uint8_t GptAttention::lean_scratch(const vk::PhysicalInfo& device) const {
  if (!stores_half(device)) return 0;
  uint8_t mask = 0;
  for (ops::Precision p : {ops::Precision::Bf16, ops::Precision::Fp16})
    if (ops::attention_takes_tiles(device, p, C_ / NH_)) mask |= uint8_t(1u << uint32_t(p));
  return mask;
}

// Where its kernels take 16 bits: attention in the matrix form, or fused where the device's
// form is the matrix form (16-bit attention fused takes matrix tiles, or the matrix form:
// ops/attention.h), LayerNorm and the residual add a quad at a time (C % 4 == 0), and the
// products storing 16-bit outputs of 3C and HS columns (HS even).
bool GptAttention::stores_half(const vk::PhysicalInfo& device) const {
  const uint32_t HS = C_ / NH_;
  const ops::Form form = ops::attention_form_for();
  return (form == ops::Form::Matrix || (form == ops::Form::Fused && ops::form_for(device) == ops::Form::Matrix)) &&
         C_ % 4 == 0 && HS % 2 == 0 && ops::matmul_stores_half(device, HS);
}

Cost GptAttention::cost() const {
  const double T = T_, C = C_;
  const double linear = 2 * T * (3 * C * C + C * C);
  const double attention = 2 * C * T * (T + 1);  // q k^T and p v over the causal half
  const double other = 8 * T * C + T * C;         // the norm, the residual
  return standard_cost(*this, linear + attention + other);
}

void GptAttention::forward(const Pass& p, const Tensors& t) const {
  const uint32_t N = p.rows * T_, C = C_;
  const auto& w = t.params;
  const auto& s = t.saved;
  const Scratch scratch = carve(t, N, C, kAttentionHalf);
  vk::Commands& cmd = p.cmd;
  // Stored tensors as Tensors says (16 bits where the Cell hands them so, stores_half): x,
  // every saved tensor but the statistics (h), y; the branch's output in the scratch is fp32.
  const ops::Precision fx = t.x_precision, h = t.y_precision, f32 = ops::Precision::Fp32, fw = t.w_precision;
  ops::layernorm_forward(cmd, t.x, w[kLn1W], w[kLn1B], s[kLn1], s[kLn1Mean], s[kLn1Rstd], N, C, 1e-5f, {fx, h});
  ops::linear_forward(cmd, s[kLn1], w[kAttnW], w[kAttnB], s[kQkv], N, C, 3 * C, std::nullopt, {h, h, fw});
  ops::attention_forward(cmd, s[kQkv], s[kAttn], s[kLse], scratch.attention, p.rows, T_, C, NH_, std::nullopt, {h, h});
  ops::linear_forward(cmd, s[kAttn], w[kProjW], w[kProjB], scratch.narrow_a, N, C, C, std::nullopt, {h, f32, fw});
  ops::residual_forward(cmd, t.x, scratch.narrow_a, t.y, N * C, {fx, h});
}

// One kernel sequence for both kinds of backward: a whole backward records each parameter
// kernel as soon as its gradient is ready; a split backward writes those gradients into
// t.deferred and leaves the kernels to backward_params, which records them in this order.
void GptAttention::backward(const Pass& p, const Tensors& t, vk::View dy, std::optional<vk::View> dx) const {
  BRIGADE_EXPECT(!p.split || t.deferred.size() == kDeferredCount, "gpt_attention split backward without its deferred tensors");
  const uint32_t N = p.rows * T_, C = C_;
  const auto& w = t.params;
  const auto& s = t.saved;
  const ops::Precision h = t.y_precision;
  const Scratch scratch = carve(t, N, C, kAttentionHalf);
  vk::Commands& cmd = p.cmd;
  const ParamGrads grads{p, t, kAttentionHalf, N, C};
  // The gradients the products read, packed in a 16-bit stage: dy (unless the layer after
  // wrote its copy, t.dy_copy), dattn and dqkv by the kernels that write them.
  const CopyTo dattn_copy = copy_to(scratch.dattn_room, h), dqkv_copy = copy_to(scratch.wide_room, h);
  const vk::View dattn = scratch.narrow_a;
  const vk::View dqkv = grads.kept(kLinear, scratch.wide), dln1 = grads.kept(kNorm, scratch.narrow_b);
  const Operand dy_product = dy_operand(cmd, t, dy, uint64_t(N) * C, scratch.dy_room);
  grads.ready(kDy, dy, dy_product);
  // Attention's gradient is rounded to h as it is stored: its products and its softmax's
  // backward then read one value of it (ops/attention.h).
  write_backward_data(cmd, dy_product, w[kProjW], dattn, N, C, C, t.w_precision, dattn_copy, h);
  ops::attention_backward(cmd, s[kQkv], s[kAttn], s[kLse], dattn, dqkv, scratch.attention, p.rows, T_, C, NH_,
                          std::nullopt, {h, h}, {dattn_copy.room, dqkv_copy.room});
  // dqkv was written last by attention_backward, and its packed copy with it: vk::Commands
  // records a barrier before the first dispatch that reads them.
  const Operand dqkv_product = read_as(dqkv_copy, dqkv);
  write_backward_data(cmd, dqkv_product, w[kAttnW], dln1, N, C, 3 * C, t.w_precision);
  grads.ready(kLinear, dqkv, dqkv_product);
  grads.ready(kNorm, dln1, {dln1});
  // dx = dy (the residual) + the gradient through ln_1.
  if (dx)
    ops::layernorm_backward_data(cmd, dln1, t.x, w[kLn1W], s[kLn1Mean], s[kLn1Rstd], *dx, N, C, t.x_precision,
                                 t.x_precision, input_gradient(t, dy));
}

void GptAttention::backward_params(const Pass& p, const Tensors& t) const {
  record_deferred(p, t, kAttentionHalf, p.rows * T_, C_);
}

// ---- MLP: y = x1 + mlp.c_proj(gelu(mlp.c_fc(ln_2(x1)))) ----

GptMlp::GptMlp(uint32_t index, uint32_t T, uint32_t C, uint32_t n_layer) : GptHalf(index, T, C, 1, n_layer) {}

std::vector<ParamSpec> GptMlp::params() const {
  const std::string p = prefix();
  const int64_t C = C_;
  const ParamKind Tr = ParamKind::Trainable;
  return {{p + "ln_2.weight", {C}, Tr, Init::Ones},
          {p + "ln_2.bias", {C}, Tr, Init::Zeros},
          {p + "mlp.c_fc.weight", {4 * C, C}, Tr, Init::Normal, kGptStd, true},
          {p + "mlp.c_fc.bias", {4 * C}, Tr, Init::Zeros},
          {p + "mlp.c_proj.weight", {C, 4 * C}, Tr, Init::Normal, proj_std(), true},
          {p + "mlp.c_proj.bias", {C}, Tr, Init::Zeros}};
}

std::vector<SavedSpec> GptMlp::saved() const {
  const uint64_t T = T_, C = C_;
  return {{"ln_2", T * C}, {"ln_2.mean", T, 0, true}, {"ln_2.rstd", T, 0, true}, {"fc", T * 4 * C}, {"gelu", T * 4 * C}};
}

std::vector<SavedSpec> GptMlp::deferred() const {
  const uint64_t T = T_, C = C_;
  return {{"dy", T * C}, {"dfc", T * 4 * C}, {"dln_2", T * C}};
}

uint64_t GptMlp::scratch_floats(uint32_t rows, ops::Precision stored, bool /*lean*/) const {
  return regions(uint64_t(rows) * T_, C_, kMlpHalf, stored).total() + kAlignFloats;
}

// The branch's output (carve).
uint64_t GptMlp::forward_scratch_floats(uint32_t rows, ops::Precision, bool) const {
  return aligned_floats(uint64_t(rows) * T_ * C_) + kAlignFloats;
}

// Where its kernels take 16 bits: LayerNorm and the residual add a quad at a time
// (C % 4 == 0), and c_fc's product storing a 16-bit output (and its GELU) of 4C columns.
bool GptMlp::stores_half(const vk::PhysicalInfo& device) const {
  return C_ % 4 == 0 && ops::matmul_stores_half(device, 4 * C_);
}

Cost GptMlp::cost() const {
  const double T = T_, C = C_;
  const double linear = 2 * T * (4 * C * C + 4 * C * C);
  const double other = 8 * T * 4 * C + 8 * T * C + T * C;  // gelu, the norm, the residual
  return standard_cost(*this, linear + other);
}

void GptMlp::forward(const Pass& p, const Tensors& t) const {
  const uint32_t N = p.rows * T_, C = C_;
  const auto& w = t.params;
  const auto& s = t.saved;
  const Scratch scratch = carve(t, N, C, kMlpHalf);
  vk::Commands& cmd = p.cmd;
  const ops::Precision fx = t.x_precision, h = t.y_precision, f32 = ops::Precision::Fp32, fw = t.w_precision;
  ops::layernorm_forward(cmd, t.x, w[kLn2W], w[kLn2B], s[kLn2], s[kLn2Mean], s[kLn2Rstd], N, C, 1e-5f, {fx, h});
  ops::linear_gelu_forward(cmd, s[kLn2], w[kFcW], w[kFcB], s[kFc], s[kGelu], N, C, 4 * C, {h, h, fw});
  ops::linear_forward(cmd, s[kGelu], w[kMlpProjW], w[kMlpProjB], scratch.narrow_a, N, 4 * C, C, std::nullopt, {h, f32, fw});
  ops::residual_forward(cmd, t.x, scratch.narrow_a, t.y, N * C, {fx, h});
}

void GptMlp::backward(const Pass& p, const Tensors& t, vk::View dy, std::optional<vk::View> dx) const {
  BRIGADE_EXPECT(!p.split || t.deferred.size() == kDeferredCount, "gpt_mlp split backward without its deferred tensors");
  const uint32_t N = p.rows * T_, C = C_;
  const auto& w = t.params;
  const auto& s = t.saved;
  const ops::Precision h = t.y_precision;
  const Scratch scratch = carve(t, N, C, kMlpHalf);
  vk::Commands& cmd = p.cmd;
  const ParamGrads grads{p, t, kMlpHalf, N, C};
  const CopyTo dfc_copy = copy_to(scratch.wide_room, h);
  const vk::View dfc = grads.kept(kLinear, scratch.wide), dln2 = grads.kept(kNorm, scratch.narrow_b);
  const Operand dy_product = dy_operand(cmd, t, dy, uint64_t(N) * C, scratch.dy_room);
  grads.ready(kDy, dy, dy_product);
  const Operand dfc_product = write_backward_data(cmd, dy_product, w[kMlpProjW], dfc, N, 4 * C, C, t.w_precision,
                                                  dfc_copy, ops::Precision::Fp32, s[kFc], h);
  grads.ready(kLinear, dfc, dfc_product);
  write_backward_data(cmd, dfc_product, w[kFcW], dln2, N, C, 4 * C, t.w_precision);
  // dx = dy (the residual) + the gradient through ln_2.
  if (dx)
    ops::layernorm_backward_data(cmd, dln2, t.x, w[kLn2W], s[kLn2Mean], s[kLn2Rstd], *dx, N, C, t.x_precision,
                                 t.x_precision, input_gradient(t, dy));
  grads.ready(kNorm, dln2, {dln2});
}

void GptMlp::backward_params(const Pass& p, const Tensors& t) const {
  record_deferred(p, t, kMlpHalf, p.rows * T_, C_);
}

}  // namespace brigade::model
