// CPU reference of ops::matmul: plain loops over the same MatmulParams, templated on the
// scalar type so the finite-difference checks run it in double.
#pragma once

#include <cstdint>
#include <span>

#include "ops/matmul.h"

namespace brigade::ref {

// C[z] = alpha * op(A[z]) op(B[z]) + bias (+ C[z] when p.accumulate); see ops::matmul. An
// empty bias means none.
template <class T>
void matmul(std::span<const T> a, std::span<const T> b, std::span<T> c, const ops::MatmulParams& p,
            std::span<const T> bias = {}) {
  const uint64_t lda = p.ld_a(), ldb = p.ld_b(), ldc = p.ld_c();
  for (uint64_t z = 0; z < p.batch; ++z) {
    const T* az = a.data() + z * p.stride_a;
    const T* bz = b.data() + z * p.stride_b;
    T* cz = c.data() + z * p.stride_c;
    for (uint64_t m = 0; m < p.M; ++m)
      for (uint64_t n = 0; n < p.N; ++n) {
        T sum = 0;
        for (uint64_t k = 0; k < p.K; ++k) {
          const T x = p.trans_a ? az[k * lda + m] : az[m * lda + k];
          const T y = p.trans_b ? bz[n * ldb + k] : bz[k * ldb + n];
          sum += x * y;
        }
        T& out = cz[m * ldc + n];
        out = T(p.alpha) * sum + (bias.empty() ? T(0) : bias[n]) + (p.accumulate ? out : T(0));
      }
  }
}

}  // namespace brigade::ref
