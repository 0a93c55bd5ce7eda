// GptBlock (engine/model/layers.h): nanoGPT's transformer Block composed from the ops of
// engine/ops. What the backward pass needs is saved per token; forward temporaries and the
// backward pass's internal gradients live in the scratch view, except that a split backward
// keeps the ones its parameter gradients need in t.deferred (other passes reuse the scratch
// before backward_params runs).
#include <algorithm>
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

// Parameter indices, in nanoGPT's state_dict order.
enum Param : size_t {
  kLn1W, kLn1B, kAttnW, kAttnB, kProjW, kProjB, kLn2W, kLn2B, kFcW, kFcB, kMlpProjW, kMlpProjB
};
// Saved tensor indices; per-token sizes in saved().
enum Saved : size_t {
  kLn1, kLn1Mean, kLn1Rstd, kQkv, kAttn, kLse, kX1, kLn2, kLn2Mean, kLn2Rstd, kFc, kGelu
};
// Deferred tensor indices (a split backward): each the internal gradient that one parameter
// group's kernel reads (record_param_grad); per-token sizes in deferred().
enum Deferred : size_t { kDy, kDfc, kDln2, kDx1, kDqkv, kDln1, kDeferredCount };

// Sub-views of the scratch view start kAlignFloats apart (operand.h); scratch_floats() adds room
// for the padding.
constexpr uint64_t kScratchRegions = 5;

// Hands out consecutive aligned sub-views of one view.
class Carver {
 public:
  explicit Carver(vk::View v) : view_(v) {}
  vk::View take(uint64_t floats) {
    const uint64_t at = aligned_floats(used_);
    BRIGADE_EXPECT((at + floats) * 4 <= view_.range, "gpt_block scratch is too small");
    used_ = at + floats;
    return vk::View(*view_.buffer, view_.offset + at * 4, floats * 4);
  }
  vk::View rest() { return take(view_.range / 4 - std::min(view_.range / 4, aligned_floats(used_))); }

 private:
  vk::View view_;
  uint64_t used_ = 0;
};

// The scratch of one pass over N tokens. Lifetimes in backward (see GptBlock::backward):
// wide_a holds the packed dy and dfc of a 16-bit stage, then dqkv; wide_b dfc, then the packed
// dx1 and dqkv; narrow_a the forward's branch output, then dx1; narrow_b dln_2, then dattn,
// then dln_1; attention is the attention kernels' own scratch, the rest of the view: (T,T)
// scores, or in a lean scratch (Layer::lean_scratch) flash attention's delta. A split backward
// uses only narrow_b (dattn), attention and the packed copies' rooms.
struct Scratch {
  vk::View wide_a, wide_b, narrow_a, narrow_b, attention;
};

// Samples whose attention scratch (heads and (T,T) scores, which grow with T^2, and in a
// 16-bit stage their packed copies) the block asks for at once: as many of `rows` as fit in
// kAttentionCap bytes, one at least; the attention launchers work through the rest in chunks
// of that many.
constexpr uint64_t kAttentionCap = 32ull << 20;
uint32_t attention_samples(uint32_t rows, uint32_t T, uint32_t C, uint32_t NH, ops::Precision stored) {
  const uint64_t per = ops::attention_scratch_floats(1, T, C, NH, stored) * 4;
  return uint32_t(std::clamp<uint64_t>(kAttentionCap / per, 1, std::max(rows, 1u)));
}

uint64_t attention_floats(uint32_t rows, uint32_t T, uint32_t C, uint32_t NH, ops::Precision stored) {
  return ops::attention_scratch_floats(attention_samples(rows, T, C, NH, stored), T, C, NH, stored);
}

// rows samples of T tokens: N = rows * T.
Scratch carve(vk::View scratch, uint32_t rows, uint32_t T, uint32_t C) {
  Carver c(scratch);
  const uint64_t N = uint64_t(rows) * T;
  return {c.take(N * 4 * C), c.take(N * 4 * C), c.take(N * C), c.take(N * C), c.rest()};
}

// Where a product also writes its result packed (MatmulParams::copy_format): in a stage storing
// 16 bits, a room of the scratch for the gradient as the products read it (operand.h).
struct CopyTo {
  ops::Precision format = ops::Precision::Fp32;
  std::optional<vk::View> room;
};
CopyTo copy_to(Carver& rooms, uint64_t elements, ops::Precision h) {
  if (!ops::is_half(h)) return {};
  return {h, rooms.take(operand_floats(elements, h))};
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

// Accumulates into t.grads the parameter gradients that `grad` (the internal gradient deferred()
// names k) gives, over N tokens: one kernel per parameter group, on the same inputs whichever
// half of a backward records it. A Linear's weight gradient is the product of `product` (grad
// as the products read it) and its saved input; its bias gradient sums grad.
void record_param_grad(vk::Commands& cmd, const Tensors& t, Deferred k, vk::View grad, Operand product,
                       uint32_t N, uint32_t C) {
  const auto& g = t.grads;
  const auto& s = t.saved;
  // dweight += product^T x, where x is a saved tensor (stored as y is); dbias += grad's sums.
  const auto linear = [&](vk::View x, size_t weight, uint32_t in, uint32_t out) {
    ops::linear_backward_weight(cmd, product.view, x, g[weight], std::nullopt, N, in, out, std::nullopt,
                                {t.y_precision, product.format});
    ops::linear_bias_backward(cmd, grad, g[weight + 1], N, out);
  };
  switch (k) {
    case kDy: return linear(s[kGelu], kMlpProjW, 4 * C, C);
    case kDfc: return linear(s[kLn2], kFcW, C, 4 * C);
    case kDln2:
      return ops::layernorm_backward_weight(cmd, grad, s[kX1], s[kLn2Mean], s[kLn2Rstd], g[kLn2W],
                                            g[kLn2B], N, C, 0, t.y_precision);
    case kDx1: return linear(s[kAttn], kProjW, C, C);
    case kDqkv: return linear(s[kLn1], kAttnW, C, 3 * C);
    case kDln1:
      return ops::layernorm_backward_weight(cmd, grad, t.x, s[kLn1Mean], s[kLn1Rstd], g[kLn1W],
                                            g[kLn1B], N, C, 0, t.x_precision);
    case kDeferredCount:
      break;
  }
  BRIGADE_EXPECT(false, "gpt_block has no such deferred gradient");
}

}  // namespace

GptBlock::GptBlock(uint32_t index, uint32_t T, uint32_t C, uint32_t n_head, uint32_t n_layer)
    : ShapedLayer({T, C}, {T, C}), index_(index), T_(T), C_(C), NH_(n_head), n_layer_(n_layer) {
  if (T_ == 0 || C_ == 0 || NH_ == 0 || n_layer_ == 0)
    throw UserError("gpt_block sizes must be positive");
  if (C_ % NH_)
    throw UserError("n_embd " + std::to_string(C_) + " is not divisible by n_head " +
                    std::to_string(NH_));
}

std::vector<ParamSpec> GptBlock::params() const {
  const std::string p = "transformer.h." + std::to_string(index_) + ".";
  const int64_t C = C_;
  const float proj_std = kGptStd / std::sqrt(2.0f * float(n_layer_));
  const ParamKind Tr = ParamKind::Trainable;
  return {{p + "ln_1.weight", {C}, Tr, Init::Ones},
          {p + "ln_1.bias", {C}, Tr, Init::Zeros},
          {p + "attn.c_attn.weight", {3 * C, C}, Tr, Init::Normal, kGptStd, true},
          {p + "attn.c_attn.bias", {3 * C}, Tr, Init::Zeros},
          {p + "attn.c_proj.weight", {C, C}, Tr, Init::Normal, proj_std, true},
          {p + "attn.c_proj.bias", {C}, Tr, Init::Zeros},
          {p + "ln_2.weight", {C}, Tr, Init::Ones},
          {p + "ln_2.bias", {C}, Tr, Init::Zeros},
          {p + "mlp.c_fc.weight", {4 * C, C}, Tr, Init::Normal, kGptStd, true},
          {p + "mlp.c_fc.bias", {4 * C}, Tr, Init::Zeros},
          {p + "mlp.c_proj.weight", {C, 4 * C}, Tr, Init::Normal, proj_std, true},
          {p + "mlp.c_proj.bias", {C}, Tr, Init::Zeros}};
}

std::vector<SavedSpec> GptBlock::saved() const {
  const uint64_t T = T_, C = C_;
  return {{"ln_1", T * C},           {"ln_1.mean", T, 0, true}, {"ln_1.rstd", T, 0, true},
          {"qkv", T * 3 * C},       {"attn", T * C},           {"lse", T * NH_, 0, true},
          {"x1", T * C},            {"ln_2", T * C},           {"ln_2.mean", T, 0, true},
          {"ln_2.rstd", T, 0, true}, {"fc", T * 4 * C},        {"gelu", T * 4 * C}};
}

std::vector<SavedSpec> GptBlock::deferred() const {
  const uint64_t T = T_, C = C_;
  return {{"dy", T * C},  {"dfc", T * 4 * C},  {"dln_2", T * C},
          {"dx1", T * C}, {"dqkv", T * 3 * C}, {"dln_1", T * C}};
}

uint64_t GptBlock::scratch_floats(uint32_t rows, ops::Precision stored, bool lean) const {
  const uint64_t attention = lean ? uint64_t(rows) * T_ * NH_ : attention_floats(rows, T_, C_, NH_, stored);
  return rows * uint64_t(T_) * 10 * C_ + attention + kScratchRegions * kAlignFloats;
}

// Flash attention on matrix tiles keeps no (T,T) scores: its backward takes B*NH*T floats of
// the scratch for delta, the forward none.
uint8_t GptBlock::lean_scratch(const vk::PhysicalInfo& device) const {
  if (!stores_half(device)) return 0;
  uint8_t mask = 0;
  for (ops::Precision p : {ops::Precision::Bf16, ops::Precision::Fp16})
    if (ops::attention_takes_tiles(device, p, C_ / NH_)) mask |= uint8_t(1u << uint32_t(p));
  return mask;
}

// Where its kernels take 16 bits: attention in the matrix form, or fused where the device's
// form is the matrix form (16-bit attention fused takes matrix tiles, or the matrix form:
// ops/attention.h), LayerNorm and the residual adds a quad at a time (C % 4 == 0), and the
// products storing 16-bit outputs of 3C, 4C and HS columns (HS even).
bool GptBlock::stores_half(const vk::PhysicalInfo& device) const {
  const uint32_t HS = C_ / NH_;
  const ops::Form form = ops::attention_form_for(device);
  return (form == ops::Form::Matrix || (form == ops::Form::Fused && ops::form_for(device) == ops::Form::Matrix)) &&
         C_ % 4 == 0 && HS % 2 == 0 && ops::matmul_stores_half(device, HS);
}

Cost GptBlock::cost() const {
  const double T = T_, C = C_;
  const double linear = 2 * T * (3 * C * C + C * C + 4 * C * C + 4 * C * C);
  const double attention = 2 * C * T * (T + 1);  // q k^T and p v over the causal half
  const double other = 8 * T * 4 * C + 2 * 8 * T * C + 2 * T * C;  // gelu, norms, residuals
  return standard_cost(*this, linear + attention + other);
}

void GptBlock::forward(const Pass& p, const Tensors& t) const {
  const uint32_t N = p.rows * T_, C = C_;
  const auto& w = t.params;
  const auto& s = t.saved;
  const Scratch scratch = carve(*t.scratch, p.rows, T_, C_);
  vk::Commands& cmd = p.cmd;
  // Stored tensors as Tensors says (16 bits where the Cell hands them so, stores_half): x,
  // every saved tensor but the statistics (h), y; the branches' outputs in the scratch are fp32.
  using ops::Formats;
  const ops::Precision fx = t.x_precision, h = t.y_precision, f32 = ops::Precision::Fp32, fw = t.w_precision;
  ops::layernorm_forward(cmd, t.x, w[kLn1W], w[kLn1B], s[kLn1], s[kLn1Mean], s[kLn1Rstd], N, C, 1e-5f, {fx, h});
  ops::linear_forward(cmd, s[kLn1], w[kAttnW], w[kAttnB], s[kQkv], N, C, 3 * C, std::nullopt, {h, h, fw});
  ops::attention_forward(cmd, s[kQkv], s[kAttn], s[kLse], scratch.attention, p.rows, T_, C, NH_, std::nullopt, {h, h});
  ops::linear_forward(cmd, s[kAttn], w[kProjW], w[kProjB], scratch.narrow_a, N, C, C, std::nullopt, {h, f32, fw});
  ops::residual_forward(cmd, t.x, scratch.narrow_a, s[kX1], N * C, {fx, h});
  ops::layernorm_forward(cmd, s[kX1], w[kLn2W], w[kLn2B], s[kLn2], s[kLn2Mean], s[kLn2Rstd], N, C, 1e-5f, {h, h});
  ops::linear_gelu_forward(cmd, s[kLn2], w[kFcW], w[kFcB], s[kFc], s[kGelu], N, C, 4 * C, {h, h, fw});
  ops::linear_forward(cmd, s[kGelu], w[kMlpProjW], w[kMlpProjB], scratch.narrow_a, N, 4 * C, C, std::nullopt, {h, f32, fw});
  ops::residual_forward(cmd, s[kX1], scratch.narrow_a, t.y, N * C, {h, t.y_precision});
}

// One kernel sequence for both kinds of backward. A whole backward keeps the internal
// gradients in the scratch and records each parameter kernel as soon as its gradient is ready;
// a split backward (p.split) writes the gradients those kernels read into t.deferred instead
// and leaves the kernels to backward_params, which records them in this order on the same values.
void GptBlock::backward(const Pass& p, const Tensors& t, vk::View dy,
                        std::optional<vk::View> dx) const {
  BRIGADE_EXPECT(!p.split || t.deferred.size() == kDeferredCount,
                 "gpt_block split backward without its deferred tensors");
  const uint32_t N = p.rows * T_, C = C_;
  const auto& w = t.params;
  const auto& s = t.saved;
  const auto& d = t.deferred;
  const Scratch scratch = carve(*t.scratch, p.rows, T_, C_);
  vk::Commands& cmd = p.cmd;
  // Where an internal gradient that a parameter kernel reads lives: in t.deferred for a split
  // backward, since other passes reuse the scratch before backward_params runs.
  const auto kept = [&](Deferred k, vk::View in_scratch) { return p.split ? d[k] : in_scratch; };
  // The point where parameter kernel k can read `grad` (`product` as the products read it): a
  // whole backward records the kernel; a split backward keeps a copy of dy, the one such
  // gradient that is not already in t.deferred.
  const auto param_grad = [&](Deferred k, vk::View grad, Operand product) {
    if (!p.split)
      record_param_grad(cmd, t, k, grad, product, N, C);
    else if (k == kDy)
      copy_floats(cmd, grad, d[kDy], uint64_t(N) * C);
  };
  // The gradients the products read, packed in a 16-bit stage: dy (packed here unless the layer
  // after wrote its copy, t.dy_copy) and dfc side by side in wide_a (free until dqkv), dx1,
  // dattn and dqkv in wide_b once dfc has been read (a split backward keeps dfc and dqkv in
  // t.deferred, so there both are free throughout). Each of the others is packed by the
  // kernel that writes it last, as it writes it, and so is dx where t.dx_copy asks.
  const ops::Precision h = t.y_precision;
  Carver wide_a(scratch.wide_a), wide_b(scratch.wide_b);
  const vk::View dy_room = wide_a.take(operand_floats(uint64_t(N) * C, h));
  const CopyTo dfc_copy = copy_to(wide_a, uint64_t(N) * 4 * C, h);

  // MLP branch: y = x1 + mlp.c_proj(gelu(mlp.c_fc(ln_2(x1)))).
  const vk::View dfc = kept(kDfc, scratch.wide_b), dln2 = kept(kDln2, scratch.narrow_b);
  // dy as the products read it: packed by the layer after this one where it wrote a copy.
  const Operand dy_product = t.dy_copy ? Operand{*t.dy_copy, h} : operand(cmd, dy, uint64_t(N) * C, h, dy_room);
  param_grad(kDy, dy, dy_product);
  const Operand dfc_product =
      write_backward_data(cmd, dy_product, w[kMlpProjW], dfc, N, 4 * C, C, t.w_precision, dfc_copy, ops::Precision::Fp32,
                          s[kFc], h);
  param_grad(kDfc, dfc, dfc_product);
  write_backward_data(cmd, dfc_product, w[kFcW], dln2, N, C, 4 * C, t.w_precision);

  // dx1 = dy (the residual) + the gradient through ln_2, packed as it is written.
  const vk::View dx1 = kept(kDx1, scratch.narrow_a);
  const CopyTo dx1_copy = copy_to(wide_b, uint64_t(N) * C, h), dattn_copy = copy_to(wide_b, uint64_t(N) * C, h),
               dqkv_copy = copy_to(wide_b, uint64_t(N) * 3 * C, h);
  ops::layernorm_backward_data(cmd, dln2, s[kX1], w[kLn2W], s[kLn2Mean], s[kLn2Rstd], dx1, N, C, t.y_precision,
                               ops::Precision::Fp32, {dy, dx1_copy.room, dx1_copy.format});
  param_grad(kDln2, dln2, {dln2});

  // Attention branch: x1 = x + attn.c_proj(attention(attn.c_attn(ln_1(x)))); dx = dx1 (the
  // residual) + the gradient through ln_1, at the end. dattn overwrites dln_2 in narrow_b (a
  // whole backward's is read by then).
  const vk::View dattn = scratch.narrow_b;
  const vk::View dqkv = kept(kDqkv, scratch.wide_a), dln1 = kept(kDln1, scratch.narrow_b);
  const Operand dx1_product = read_as(dx1_copy, dx1);
  param_grad(kDx1, dx1, dx1_product);
  // Attention's gradient is rounded to h as it is stored: its products and its softmax's
  // backward then read one value of it (ops/attention.h).
  write_backward_data(cmd, dx1_product, w[kProjW], dattn, N, C, C, t.w_precision, dattn_copy, h);
  ops::attention_backward(cmd, s[kQkv], s[kAttn], s[kLse], dattn, dqkv, scratch.attention, p.rows,
                          T_, C, NH_, std::nullopt, {h, h}, {dattn_copy.room, dqkv_copy.room});
  // dqkv (in the scratch buffer for a whole backward) was written last by attention_backward,
  // and its packed copy with it: vk::Commands records a barrier before the first dispatch that
  // reads them.
  const Operand dqkv_product = read_as(dqkv_copy, dqkv);
  write_backward_data(cmd, dqkv_product, w[kAttnW], dln1, N, C, 3 * C, t.w_precision);
  param_grad(kDqkv, dqkv, dqkv_product);
  param_grad(kDln1, dln1, {dln1});
  if (dx)
    ops::layernorm_backward_data(cmd, dln1, t.x, w[kLn1W], s[kLn1Mean], s[kLn1Rstd], *dx, N, C,
                                 t.x_precision, t.x_precision, input_gradient(t, dx1));
}

// The second half of a split backward: the parameter kernels a whole backward records, in its
// order, on the gradients the first half kept.
void GptBlock::backward_params(const Pass& p, const Tensors& t) const {
  BRIGADE_EXPECT(t.deferred.size() == kDeferredCount,
                 "gpt_block backward_params without its deferred tensors");
  const uint32_t N = p.rows * T_;
  const Scratch scratch = carve(*t.scratch, p.rows, T_, C_);
  const uint64_t widths[kDeferredCount] = {C_, 4ull * C_, C_, C_, 3ull * C_, C_};  // deferred()'s
  for (size_t k = 0; k < kDeferredCount; ++k) {
    const bool product = k != kDln2 && k != kDln1;  // a Linear's weight gradient
    const Operand o = product ? operand(p.cmd, t.deferred[k], N * widths[k], t.y_precision, scratch.wide_a) : Operand{t.deferred[k]};
    record_param_grad(p.cmd, t, Deferred(k), t.deferred[k], o, N, C_);
  }
}

}  // namespace brigade::model
