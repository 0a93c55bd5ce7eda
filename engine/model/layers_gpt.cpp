// nanoGPT's Embedding (transformer.wte + transformer.wpe) and the tied LmHead
// (engine/model/layers.h).
#include "model/layers.h"
#include "ops/embedding.h"
#include "ops/linear.h"
#include "util/error.h"

namespace brigade::model {
namespace {

ParamSpec wte(uint32_t vocab, uint32_t C) {
  return {"transformer.wte.weight", {vocab, C}, ParamKind::Trainable, Init::Normal, kGptStd};
}

}  // namespace

Embedding::Embedding(uint32_t vocab_size, uint32_t block_size, uint32_t T, uint32_t C)
    : ShapedLayer({T}, {T, C}), vocab_(vocab_size), block_size_(block_size), T_(T), C_(C) {
  if (vocab_ == 0 || C_ == 0 || T_ == 0) throw UserError("embedding sizes must be positive");
  if (T_ > block_size_)
    throw UserError("embedding: sequence length " + std::to_string(T_) + " exceeds block_size " +
                    std::to_string(block_size_));
}

std::vector<ParamSpec> Embedding::params() const {
  return {wte(vocab_, C_),
          {"transformer.wpe.weight", {block_size_, C_}, ParamKind::Trainable, Init::Normal, kGptStd}};
}

// One add per output element.
Cost Embedding::cost() const { return standard_cost(*this, double(T_) * C_); }

void Embedding::forward(const Pass& p, const Tensors& t) const {
  ops::embedding_forward(p.cmd, t.x, t.params[0], t.params[1], t.y, p.rows, T_, C_, vocab_);
}

uint64_t Embedding::scratch_floats(uint32_t rows, ops::Precision, bool) const {
  return ops::embedding_scratch_floats(rows, T_, vocab_);
}

void Embedding::backward(const Pass& p, const Tensors& t, vk::View dy,
                         std::optional<vk::View>) const {
  ops::embedding_backward(p.cmd, dy, t.x, t.grads[0], t.grads[1], p.rows, T_, C_, vocab_, t.scratch);
}

LmHead::LmHead(uint32_t T, uint32_t C, uint32_t vocab_size)
    : ShapedLayer({T, C}, {T, vocab_size}), T_(T), C_(C), vocab_(vocab_size) {}

std::vector<ParamSpec> LmHead::params() const {
  ParamSpec w = wte(vocab_, C_);
  w.product = true;  // the embedding's lookup reads it in fp32; this product through a copy
  return {w};
}

Cost LmHead::cost() const { return standard_cost(*this, 2.0 * T_ * C_ * vocab_); }

bool LmHead::stores_half(const vk::PhysicalInfo& device) const { return ops::matmul_stores_half(device, vocab_); }

void LmHead::forward(const Pass& p, const Tensors& t) const {
  ops::linear_forward(p.cmd, t.x, t.params[0], std::nullopt, t.y, p.rows * T_, C_, vocab_, std::nullopt,
                      {t.x_precision, t.y_precision, t.w_precision});
}

std::vector<SavedSpec> LmHead::deferred() const { return {{"dy", uint64_t(T_) * vocab_}}; }

// In a 16-bit stage the products read dy packed in the scratch (operand.h), as a Linear's do.
uint64_t LmHead::scratch_floats(uint32_t rows, ops::Precision stored, bool) const {
  return operand_floats(uint64_t(rows) * T_ * vocab_, stored);
}

void LmHead::backward(const Pass& p, const Tensors& t, vk::View dy,
                      std::optional<vk::View> dx) const {
  const uint32_t n = p.rows * T_;
  if (p.split) copy_floats(p.cmd, dy, t.deferred[0], uint64_t(n) * vocab_);
  const Operand product = product_operand(p, t, dy);
  if (!p.split) backward_weight(p, t, product);
  if (dx)
    ops::linear_backward_data(p.cmd, product.view, t.params[0], *dx, n, C_, vocab_, std::nullopt,
                              {t.x_precision, product.format, t.w_precision});
}

void LmHead::backward_params(const Pass& p, const Tensors& t) const {
  backward_weight(p, t, product_operand(p, t, t.deferred[0]));
}

Operand LmHead::product_operand(const Pass& p, const Tensors& t, vk::View dy) const {
  if (!packs_gradient(t.x_precision, t.y_precision)) return {dy};
  return operand(p.cmd, dy, uint64_t(p.rows) * T_ * vocab_, t.y_precision, *t.scratch);
}

void LmHead::backward_weight(const Pass& p, const Tensors& t, const Operand& product) const {
  ops::linear_backward_weight(p.cmd, product.view, t.x, t.grads[0], std::nullopt, p.rows * T_, C_, vocab_,
                              std::nullopt, {t.x_precision, product.format});
}

}  // namespace brigade::model
