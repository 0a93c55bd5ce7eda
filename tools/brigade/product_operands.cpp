#include "product_operands.h"

#include <cstring>
#include <span>

#include "bench_tilings.h"
#include "ops/precision.h"

namespace brigade::cli {
namespace {

using ops::MatmulParams;

// A causal product that takes op(A) as zero right or left of its diagonal may leave those
// elements out, so they are zero as in the step (attention's probabilities above the diagonal).
void zero_masked(const MatmulParams& p, std::span<float> a) {
  using Causal = MatmulParams::Causal;
  if (p.causal != Causal::KToRow && p.causal != Causal::KFromRow) return;
  for (uint64_t i = 0; i < uint64_t(p.batch) * p.terms; ++i) {
    const uint64_t base = p.offset_a + (i / p.heads) * p.stride_a + (i % p.heads) * p.head_stride_a;
    for (uint32_t m = 0; m < p.M; ++m)
      for (uint32_t k = 0; k < p.K; ++k)
        if (p.causal == Causal::KToRow ? k > m : k < m) a[base + (p.trans_a ? uint64_t(k) * p.ld_a() + m : uint64_t(m) * p.ld_a() + k)] = 0;
  }
}

}  // namespace

Operands::Operands(vk::Device& dev, const ops::CapturedProduct& c) {
  const MatmulParams& p = c.params;
  auto add = [&](const ops::CapturedOperand& o, ops::Precision format, const char* name) {
    const uint64_t bytes = (o.offset + o.bytes + 15) / 16 * 16, size = ops::is_half(format) ? 2 : 4;
    buffers_.push_back(std::make_unique<vk::Buffer>(dev, bytes, vk::Category::Activations, name));
    std::vector<float> values = random_values(bytes / size, uint32_t(buffers_.size()));
    if (views_.empty()) zero_masked(p, std::span(values).subspan(o.offset / size));
    const std::vector<uint32_t> words = stored_words(values, format);
    vk::upload(*buffers_.back(), words.data(), bytes);
    if (views_.size() == 2) c_words_ = words;
    formats_.push_back(format);
    views_.emplace_back(*buffers_.back(), o.offset, o.bytes);
    return views_.back();
  };
  add(c.a, p.a_format, "A");
  add(c.b, p.b_format, "B");
  add(c.c, p.c_format, "C");
  if (c.bias) bias_ = add(*c.bias, ops::Precision::Fp32, "bias");
  const bool gelu = p.epilogue == MatmulParams::Epilogue::Gelu;
  if (c.epilogue) epilogue_ = add(*c.epilogue, gelu ? p.c_format : p.e_format, "epilogue tensor");
  if (c.copy) copy_ = add(*c.copy, p.copy_format, "C's copy");
}

void Operands::record(vk::Commands& cmd, const MatmulParams& p) const {
  ops::matmul(cmd, views_[0], views_[1], views_[2], p, bias_, epilogue_, copy_);
}

std::vector<float> Operands::widen(size_t i, std::span<const uint32_t> words) const {
  const ops::Precision f = formats_[i];
  std::vector<float> out(ops::is_half(f) ? 2 * words.size() : words.size());
  if (ops::is_half(f))
    ops::unpack_on_host(words, out, f);
  else
    std::memcpy(out.data(), words.data(), 4 * words.size());
  out.erase(out.begin(), out.begin() + int64_t(views_[i].offset / (ops::is_half(f) ? 2 : 4)));
  return out;
}

std::vector<float> Operands::run_once(vk::Device& dev, const MatmulParams& p, std::optional<vk::View> workspace) const {
  vk::Buffer& c = *buffers_[2];
  vk::upload(c, c_words_.data(), c.size());
  vk::Commands cmd(dev, "bench products");
  cmd.set_workspace(workspace);
  record(cmd, p);
  cmd.run();
  std::vector<uint32_t> words(c.size() / 4);
  vk::download(c, words.data(), c.size());
  return widen(2, words);
}

HostOperands Operands::host(const MatmulParams& p) const {
  const auto read = [&](size_t i) {
    std::vector<uint32_t> words(buffers_[i]->size() / 4);
    vk::download(*buffers_[i], words.data(), buffers_[i]->size());
    return widen(i, words);
  };
  HostOperands h{read(0), read(1), widen(2, c_words_), {}, {}};
  size_t next = 3;
  if (bias_) h.bias = read(next++);
  if (epilogue_ && p.epilogue == MatmulParams::Epilogue::GeluGrad) h.pre = read(next);
  return h;
}

}  // namespace brigade::cli
