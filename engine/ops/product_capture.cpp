#include "ops/product_capture.h"

#include <cstdio>
#include <initializer_list>
#include <vector>

namespace brigade::ops {
namespace {

thread_local ProductCapture* newest = nullptr;

}  // namespace

ProductCapture::ProductCapture() : outer_(newest) { newest = this; }

ProductCapture::~ProductCapture() { newest = outer_; }

ProductCapture* ProductCapture::active() { return newest; }

std::string product_details(const CapturedProduct& c) {
  const MatmulParams& p = c.params;
  std::vector<std::string> d;
  auto format = [&](const char* what, Precision f) {
    if (is_half(f)) d.push_back(std::string(what) + " " + precision_name(f));
  };
  format("A", p.a_format), format("B", p.b_format), format("C", p.c_format), format("C rounded to", p.c_round);
  format("C copied to", p.copy_format);
  const char* epilogues[] = {"", "GELU", "GELU gradient", "ReLU"};
  if (p.epilogue != MatmulParams::Epilogue::None) d.push_back(epilogues[uint32_t(p.epilogue)]);
  if (c.bias) d.push_back(p.bias_rows ? "bias per row" : "bias");
  if (p.accumulate) d.push_back("accumulating");
  if (p.tiling) d.push_back("the caller's " + p.tiling->name());
  std::string out;
  for (const std::string& s : d) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::string product_key(const CapturedProduct& c) {
  // Built by appending (a step records its products every time, and each looks its key up
  // where the device has tuned tilings).
  const MatmulParams& p = c.params;
  std::string k = product_name(p) + '|' + product_details(c);
  auto fields = [&](std::initializer_list<uint64_t> values) {
    k += '|';
    for (const uint64_t v : values) k += std::to_string(v) + ' ';
  };
  fields({p.ld_a(), p.ld_b(), p.ld_c()});
  fields({p.stride_a, p.stride_b, p.stride_c});
  fields({p.heads, p.head_stride_a, p.head_stride_b, p.head_stride_c});
  fields({p.offset_a, p.offset_b, p.offset_c});
  char alpha[32];
  std::snprintf(alpha, sizeof alpha, "%.9g", double(p.alpha));
  k += std::string("|") + alpha + ' ' + std::to_string(uint32_t(p.e_format)) + '|';
  for (const auto& o : {std::optional(c.a), std::optional(c.b), std::optional(c.c), c.bias, c.epilogue, c.copy})
    k += (o ? std::to_string(o->offset) + "+" + std::to_string(o->bytes) : "-") + ' ';
  return k;
}

}  // namespace brigade::ops
