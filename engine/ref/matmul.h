// CPU reference of ops::matmul: plain loops over the same MatmulParams, templated on the
// scalar type so the finite-difference checks run it in double.
#pragma once

#include <cstdint>
#include <span>

#include "ops/matmul.h"

namespace brigade::ref {

// C[z] = alpha * sum_r op(A[z,r]) op(B[z,r]) + bias (+ C[z] when p.accumulate); see
// ops::matmul. An empty bias means none.
template <class T>
void matmul(std::span<const T> a, std::span<const T> b, std::span<T> c, const ops::MatmulParams& p,
            std::span<const T> bias = {}) {
  const uint64_t lda = p.ld_a(), ldb = p.ld_b(), ldc = p.ld_c();
  // Where matrix i of an operand starts: a grid of heads per stride.
  const auto at = [&](uint64_t i, uint32_t offset, uint32_t stride, uint32_t head_stride) {
    return offset + i / p.heads * stride + i % p.heads * head_stride;
  };
  for (uint64_t z = 0; z < p.batch; ++z) {
    T* cz = c.data() + at(z, p.offset_c, p.stride_c, p.head_stride_c);
    for (uint64_t m = 0; m < p.M; ++m)
      for (uint64_t n = 0; n < p.N; ++n) {
        T sum = 0;
        for (uint64_t r = 0; r < p.terms; ++r) {
          const T* az = a.data() + at(z * p.terms + r, p.offset_a, p.stride_a, p.head_stride_a);
          const T* bz = b.data() + at(z * p.terms + r, p.offset_b, p.stride_b, p.head_stride_b);
          for (uint64_t k = 0; k < p.K; ++k) {
            const T x = p.trans_a ? az[k * lda + m] : az[m * lda + k];
            const T y = p.trans_b ? bz[n * ldb + k] : bz[k * ldb + n];
            sum += x * y;
          }
        }
        const T add = bias.empty() ? T(0) : bias[p.bias_rows ? m : n];
        T& out = cz[m * ldc + n];
        out = T(p.alpha) * sum + add + (p.accumulate ? out : T(0));
      }
  }
}

}  // namespace brigade::ref
