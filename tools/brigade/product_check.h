// How `bench products` checks a candidate tiling's C against the default's: how far the two
// lie apart as a share of what IEEE sums in another order and C's rounding are expected to
// allow, where the worst element is; and, where they lie farther apart, the elements summed in
// double from the operands as stored, with what any of the kernels' ways of summing can be off
// by, which says whether the two are both right (matrix units' truncated sums drift farther than
// IEEE sums do), or which of them is off.
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

// One element of C under a candidate tiling and under the default.
struct Element {
  uint32_t z = 0, m = 0, n = 0;  // C[z][m][n]
  double got = 0, want = 0;      // its value under the candidate, under the default
};

struct Disagreement {
  double share = 0;  // the largest, of the difference allowed: at most 1 agrees; INFINITY: NaN on one side only
  Element worst;     // the element of that share
  Element farthest;  // the element whose two values lie farthest apart
};

// Where C[z][m][n] lies among a product's C values (from the start of C's view).
inline uint64_t c_element(const ops::MatmulParams& p, uint32_t z, uint32_t m, uint32_t n) {
  return p.offset_c + uint64_t(z / p.heads) * p.stride_c + uint64_t(z % p.heads) * p.head_stride_c +
         uint64_t(m) * p.ld_c() + n;
}

// `got` against `want` over the product's C matrices (the first and last four), as a share of
// what fp32 sums in another order (1e-5 sqrt(K), relative) and C's rounding to 16 bits allow.
// Causal products leave blocks above the diagonal unspecified, so only the lower triangle counts.
// This is what IEEE sums' errors, which wander, are expected to stay within; sums truncated step
// by step (matrix units') drift one way, and where the two disagree the elements' double sums
// decide (summed_element, off_by).
inline Disagreement disagreement(const ops::MatmulParams& p, const std::vector<float>& got,
                                 const std::vector<float>& want) {
  const double sums = 1e-5 * std::sqrt(double(std::max(p.K, 1u)));
  const double rounding = ops::is_half(p.c_format) || ops::is_half(p.c_round) ? 1.0 / 128 : 0.0;
  Disagreement d;
  double apart = -1;
  for (uint32_t z = 0; z < p.batch; ++z) {
    if (z == 4 && p.batch > 8) z = p.batch - 4;
    for (uint32_t m = 0; m < p.M; ++m)
      for (uint32_t n = 0; n < (p.causal == ops::MatmulParams::Causal::SkipAbove ? m + 1 : p.N); ++n) {
        const uint64_t at = c_element(p, z, m, n);
        const double g = got.at(at), w = want.at(at);
        const Element e{z, m, n, g, w};
        double share = 0;
        if (std::isnan(g) != std::isnan(w))
          share = INFINITY;
        else if (!std::isnan(w))
          share = std::abs(g - w) / (sums * (1 + std::abs(w)) + rounding * std::abs(w));
        if (share > d.share) d.share = share, d.worst = e;
        if (std::isinf(share)) {
          d.farthest = e;
          return d;
        }
        if (!std::isnan(w) && std::abs(g - w) > apart) apart = std::abs(g - w), d.farthest = e;
      }
  }
  return d;
}

// A product's operands as stored, widened to float, each from its view's start (C's first
// values, the bias and GELU's gradient's pre-activation empty where the product has none).
struct HostOperands {
  std::vector<float> a, b, c, bias, pre;
};

// An element of C summed in double from the operands as stored, and how far any kernel's value
// of it can lie from that. The bound: its N terms summed in fp32 in consecutive parts of K, in
// steps of one term rounded to nearest (the SIMT kernels, whose fp32 products round too) or of 8
// and more whose terms and running sum are aligned to the largest and truncated (matrix units:
// NVIDIA's do so, which is not IEEE arithmetic), each step's error is at most 1.25 units of
// 2^-23 times S a term, S twice the largest the running sum reaches plus the largest term, so
// 1.25 N 2^-23 S, as alpha and GELU's gradient scale the sum; then four units in the last place
// of the fp32 epilogue's values, and C's rounding to 16 bits (1/128 of it).
struct Summed {
  double value = NAN;
  double allowed = 0;
};

inline Summed summed_element(const ops::MatmulParams& p, const HostOperands& o, const Element& e) {
  using Epilogue = ops::MatmulParams::Epilogue;
  const auto start = [&](uint32_t offset, uint32_t stride, uint32_t head_stride, uint64_t i) {
    return offset + i / p.heads * stride + i % p.heads * head_stride;
  };
  double sum = 0, reach = 0, term_max = 0;
  for (uint32_t r = 0; r < p.terms; ++r) {
    const uint64_t i = uint64_t(e.z) * p.terms + r;
    const uint64_t a0 = start(p.offset_a, p.stride_a, p.head_stride_a, i), b0 = start(p.offset_b, p.stride_b, p.head_stride_b, i);
    for (uint32_t k = 0; k < p.K; ++k) {
      const double t = double(o.a.at(a0 + (p.trans_a ? uint64_t(k) * p.ld_a() + e.m : uint64_t(e.m) * p.ld_a() + k))) *
                       double(o.b.at(b0 + (p.trans_b ? uint64_t(e.n) * p.ld_b() + k : uint64_t(k) * p.ld_b() + e.n)));
      sum += t;
      reach = std::max(reach, std::abs(sum)), term_max = std::max(term_max, std::abs(t));
    }
  }
  const double unit = std::ldexp(1.0, -23), terms = double(p.K) * p.terms;
  double scale = std::abs(double(p.alpha));  // of the sum's error in C
  double v = double(p.alpha) * sum, others = std::abs(v);
  if (!o.bias.empty()) v += o.bias.at(p.bias_rows ? e.m : e.n), others += std::abs(v);
  const uint64_t at = c_element(p, e.z, e.m, e.n);
  if (p.epilogue == Epilogue::GeluGrad) {
    const double x = o.pre.at(at), dy = 1;
    double grad = 0;
    ref::gelu_backward(&x, &dy, &grad, 1);
    v *= grad, scale *= std::abs(grad), others = others * std::abs(grad) + std::abs(v);
  }
  if (p.epilogue == Epilogue::Relu) v = std::isnan(v) ? v : std::max(v, 0.0);
  if (p.accumulate) v += o.c.at(at), others += std::abs(o.c.at(at)) + std::abs(v);
  const bool rounded = ops::is_half(p.c_format) || ops::is_half(p.c_round);
  return {v, scale * 1.25 * terms * unit * (2 * reach + term_max) + 4 * unit * others +
                 (rounded ? std::abs(v) / 128 : 0.0)};
}

// How far `x` lies from the double sum, as a share of how far a kernel's value can (at most 1:
// a right sum).
inline double off_by(double x, const Summed& s) {
  const double d = std::abs(x - s.value);
  return d == 0 ? 0 : d / s.allowed;
}

// A disagreement in words: its share of the difference allowed, where, that element summed in
// double (`summed`; NAN: not known), and how far the candidate and the default lie from it as
// shares of what a kernel's sums allow: "3.20x the difference allowed; the worst, C[17][250]:
// 1.234568 against the default's 1.24, 1.240001 summed in double; from it, the tiling 4.12x
// and the default 0.01x what fp32 sums can be off".
inline std::string explained(const ops::MatmulParams& p, const Disagreement& d, const Summed& summed,
                             double tiling_off = NAN, double default_off = NAN) {
  char text[320];
  const std::string z = p.batch > 1 ? std::to_string(d.worst.z) + "][" : "";
  if (std::isfinite(d.share))
    std::snprintf(text, sizeof text, "%.2fx the difference allowed", d.share);
  else
    std::snprintf(text, sizeof text, "NaN on one side only");
  std::string out = text;
  std::snprintf(text, sizeof text, "; the worst, C[%s%u][%u]: %.7g against the default's %.7g", z.c_str(), d.worst.m,
                d.worst.n, d.worst.got, d.worst.want);
  out += text;
  if (!std::isnan(summed.value)) {
    std::snprintf(text, sizeof text, ", %.7g summed in double", summed.value);
    out += text;
  }
  if (!std::isnan(tiling_off)) {
    std::snprintf(text, sizeof text, "; from it, the tiling %.2fx and the default %.2fx what fp32 sums can be off",
                  tiling_off, default_off);
    out += text;
  }
  return out;
}

}  // namespace brigade::cli
