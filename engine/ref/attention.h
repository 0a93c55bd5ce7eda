// Plain-loop CPU reference of the causal self-attention core (ops/attention.h), templated on
// the scalar so the same code runs the finite-difference checks in double. Same arguments
// as the launchers, minus the GPU's scratch. (The scalar parameter is called Real because T
// is the sequence length here.)
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace brigade::ref {

// qkv (B,T,3C) -> y (B,T,C), lse (B,NH,T) = log sum_{j<=t} exp(scale * q_t.k_j).
template <class Real>
void attention_forward(const Real* qkv, Real* y, Real* lse, uint32_t B, uint32_t T, uint32_t C,
                       uint32_t NH) {
  const uint32_t HS = C / NH;
  const Real scale = Real(1) / std::sqrt(Real(HS));
  std::vector<Real> s(T);
  for (uint32_t b = 0; b < B; ++b)
    for (uint32_t h = 0; h < NH; ++h)
      for (uint32_t t = 0; t < T; ++t) {
        const Real* q = qkv + (size_t(b) * T + t) * 3 * C + h * HS;
        Real m = -INFINITY;
        for (uint32_t j = 0; j <= t; ++j) {
          const Real* k = qkv + (size_t(b) * T + j) * 3 * C + C + h * HS;
          Real dot = 0;
          for (uint32_t d = 0; d < HS; ++d) dot += q[d] * k[d];
          s[j] = scale * dot;
          m = std::max(m, s[j]);
        }
        Real sum = 0;
        for (uint32_t j = 0; j <= t; ++j) sum += s[j] = std::exp(s[j] - m);
        Real* out = y + (size_t(b) * T + t) * C + h * HS;
        for (uint32_t d = 0; d < HS; ++d) out[d] = 0;
        for (uint32_t j = 0; j <= t; ++j) {
          const Real* v = qkv + (size_t(b) * T + j) * 3 * C + 2 * C + h * HS;
          for (uint32_t d = 0; d < HS; ++d) out[d] += s[j] / sum * v[d];
        }
        lse[(size_t(b) * NH + h) * T + t] = m + std::log(sum);
      }
}

// The forward in reverse: dqkv (B,T,3C) += dloss/dqkv, from qkv (B,T,3C), y (B,T,C),
// lse (B,NH,T) and dy (B,T,C). With P = softmax(S) rebuilt from lse and dP = dy v^T:
// dS = P * (dP - rowsum(P * dP)), where rowsum(P * dP) = dy_t.y_t; dq = scale dS k,
// dk = scale dS^T q, dv = P^T dy.
template <class Real>
void attention_backward(const Real* qkv, const Real* y, const Real* lse, const Real* dy,
                        Real* dqkv, uint32_t B, uint32_t T, uint32_t C, uint32_t NH) {
  const uint32_t HS = C / NH;
  const Real scale = Real(1) / std::sqrt(Real(HS));
  auto at = [&](uint32_t b, uint32_t t, uint32_t part, uint32_t h) {
    return (size_t(b) * T + t) * 3 * C + part * C + h * HS;  // part 0 q, 1 k, 2 v
  };
  for (uint32_t b = 0; b < B; ++b)
    for (uint32_t h = 0; h < NH; ++h)
      for (uint32_t i = 0; i < T; ++i) {
        const size_t row = (size_t(b) * T + i) * C + h * HS;
        const Real* g = dy + row;
        Real delta = 0;
        for (uint32_t d = 0; d < HS; ++d) delta += g[d] * y[row + d];
        const Real l = lse[(size_t(b) * NH + h) * T + i];
        for (uint32_t j = 0; j <= i; ++j) {
          const Real *q = qkv + at(b, i, 0, h), *k = qkv + at(b, j, 1, h), *v = qkv + at(b, j, 2, h);
          Real s = 0, dp = 0;
          for (uint32_t d = 0; d < HS; ++d) s += q[d] * k[d], dp += g[d] * v[d];
          const Real p = std::exp(scale * s - l);
          const Real ds = p * (dp - delta);
          Real *dq = dqkv + at(b, i, 0, h), *dk = dqkv + at(b, j, 1, h), *dv = dqkv + at(b, j, 2, h);
          for (uint32_t d = 0; d < HS; ++d) {
            dq[d] += scale * ds * k[d];
            dk[d] += scale * ds * q[d];
            dv[d] += p * g[d];
          }
        }
      }
}

}  // namespace brigade::ref
