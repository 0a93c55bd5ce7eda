// How `bench products` checks a candidate tiling's C against the default's: how far the two
// lie apart as a share of what the sums' order and C's rounding allow, where the worst element
// is, and that element's value summed in double from the operands as stored, which says which
// of the two is off (a wrong tiling, or a default looser than the check).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "ops/matmul.h"
#include "ops/precision.h"
#include "ref/activation.h"

namespace brigade::cli {

struct Disagreement {
  double share = 0;  // of the difference allowed: at most 1 agrees; INFINITY: NaN on one side only
  uint32_t z = 0, m = 0, n = 0;  // the worst element: C[z][m][n]
  double got = 0, want = 0;      // its value under the candidate, under the default
};

// Where C[z][m][n] lies among a product's C values (from the start of C's view).
inline uint64_t c_element(const ops::MatmulParams& p, uint32_t z, uint32_t m, uint32_t n) {
  return p.offset_c + uint64_t(z / p.heads) * p.stride_c + uint64_t(z % p.heads) * p.head_stride_c +
         uint64_t(m) * p.ld_c() + n;
}

// `got` against `want` over the product's C matrices (the first and last four), as a share of
// what fp32 sums in another order (1e-5 sqrt(K), relative) and C's rounding to 16 bits allow.
// Causal products leave blocks above the diagonal unspecified, so only the lower triangle counts.
inline Disagreement disagreement(const ops::MatmulParams& p, const std::vector<float>& got,
                                 const std::vector<float>& want) {
  const double sums = 1e-5 * std::sqrt(double(std::max(p.K, 1u)));
  const double rounding = ops::is_half(p.c_format) || ops::is_half(p.c_round) ? 1.0 / 128 : 0.0;
  Disagreement worst;
  for (uint32_t z = 0; z < p.batch; ++z) {
    if (z == 4 && p.batch > 8) z = p.batch - 4;
    for (uint32_t m = 0; m < p.M; ++m)
      for (uint32_t n = 0; n < (p.causal == ops::MatmulParams::Causal::SkipAbove ? m + 1 : p.N); ++n) {
        const uint64_t at = c_element(p, z, m, n);
        const double g = got.at(at), w = want.at(at);
        double share = 0;
        if (std::isnan(g) != std::isnan(w))
          share = INFINITY;
        else if (!std::isnan(w))
          share = std::abs(g - w) / (sums * (1 + std::abs(w)) + rounding * std::abs(w));
        if (share > worst.share) worst = {share, z, m, n, g, w};
        if (std::isinf(share)) return worst;
      }
  }
  return worst;
}

// A disagreement in words: its share of the difference allowed, where, and `exact` (the element
// summed in double; NAN: not known): "3.20x the difference allowed; the worst, C[17][250]:
// 1.234568 against the default's 1.24, 1.240001 summed in double".
inline std::string explained(const ops::MatmulParams& p, const Disagreement& d, double exact) {
  char text[256];
  const std::string z = p.batch > 1 ? std::to_string(d.z) + "][" : "";
  if (std::isfinite(d.share))
    std::snprintf(text, sizeof text, "%.2fx the difference allowed", d.share);
  else
    std::snprintf(text, sizeof text, "NaN on one side only");
  std::string out = text;
  std::snprintf(text, sizeof text, "; the worst, C[%s%u][%u]: %.7g against the default's %.7g", z.c_str(), d.m, d.n,
                d.got, d.want);
  out += text;
  if (!std::isnan(exact)) {
    std::snprintf(text, sizeof text, ", %.7g summed in double", exact);
    out += text;
  }
  return out;
}

// A product's operands as stored, widened to float, each from its view's start (C's first
// values, the bias and GELU's gradient's pre-activation empty where the product has none).
struct HostOperands {
  std::vector<float> a, b, c, bias, pre;
};

// C[z][m][n] in double from the operands as stored: alpha times the sum of the products, the
// bias, the epilogue (shaders/matmul_io.glsl's output_value) and C's first value where the
// product accumulates; unrounded. GELU's C is the sum as usual (its activation goes elsewhere).
inline double exact_element(const ops::MatmulParams& p, const HostOperands& o, uint32_t z, uint32_t m, uint32_t n) {
  using Epilogue = ops::MatmulParams::Epilogue;
  const auto start = [&](uint32_t offset, uint32_t stride, uint32_t head_stride, uint64_t i) {
    return offset + i / p.heads * stride + i % p.heads * head_stride;
  };
  double sum = 0;
  for (uint32_t r = 0; r < p.terms; ++r) {
    const uint64_t i = uint64_t(z) * p.terms + r;
    const uint64_t a0 = start(p.offset_a, p.stride_a, p.head_stride_a, i), b0 = start(p.offset_b, p.stride_b, p.head_stride_b, i);
    for (uint32_t k = 0; k < p.K; ++k)
      sum += double(o.a.at(a0 + (p.trans_a ? uint64_t(k) * p.ld_a() + m : uint64_t(m) * p.ld_a() + k))) *
             double(o.b.at(b0 + (p.trans_b ? uint64_t(n) * p.ld_b() + k : uint64_t(k) * p.ld_b() + n)));
  }
  double v = double(p.alpha) * sum;
  if (!o.bias.empty()) v += o.bias.at(p.bias_rows ? m : n);
  const uint64_t at = c_element(p, z, m, n);
  if (p.epilogue == Epilogue::GeluGrad) {
    const double x = o.pre.at(at), dy = 1;
    double grad = 0;
    ref::gelu_backward(&x, &dy, &grad, 1);
    v *= grad;
  }
  if (p.epilogue == Epilogue::Relu) v = std::isnan(v) ? v : std::max(v, 0.0);
  return p.accumulate ? o.c.at(at) + v : v;
}

}  // namespace brigade::cli
