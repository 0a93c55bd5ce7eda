// CPU reference for LayerNorm over the last dimension. Argument order as ops/layernorm.h.
#pragma once

#include <cmath>
#include <cstdint>

namespace brigade::ref {

// x, y: (N, C)  weight, bias: (C)  mean, rstd: (N)
template <class T>
void layernorm_forward(const T* x, const T* weight, const T* bias, T* y, T* mean, T* rstd,
                       uint32_t N, uint32_t C, T eps = T(1e-5)) {
  for (uint32_t n = 0; n < N; ++n) {
    const T* row = x + size_t(n) * C;
    T m = 0, v = 0;
    for (uint32_t c = 0; c < C; ++c) m += row[c];
    m /= T(C);
    for (uint32_t c = 0; c < C; ++c) v += (row[c] - m) * (row[c] - m);
    const T r = T(1) / std::sqrt(v / T(C) + eps);
    for (uint32_t c = 0; c < C; ++c) y[size_t(n) * C + c] = (row[c] - m) * r * weight[c] + bias[c];
    mean[n] = m;
    rstd[n] = r;
  }
}

// dx += rstd * (g - mean_C(g) - xhat * mean_C(g * xhat)),  g = dy * weight.
// dy, x, dx: (N, C)  weight: (C)  mean, rstd: (N)
template <class T>
void layernorm_backward_data(const T* dy, const T* x, const T* weight, const T* mean,
                             const T* rstd, T* dx, uint32_t N, uint32_t C) {
  for (uint32_t n = 0; n < N; ++n) {
    const size_t base = size_t(n) * C;
    T mean_g = 0, mean_gxhat = 0;
    for (uint32_t c = 0; c < C; ++c) {
      const T g = dy[base + c] * weight[c];
      mean_g += g;
      mean_gxhat += g * (x[base + c] - mean[n]) * rstd[n];
    }
    mean_g /= T(C);
    mean_gxhat /= T(C);
    for (uint32_t c = 0; c < C; ++c) {
      const T xhat = (x[base + c] - mean[n]) * rstd[n];
      dx[base + c] += rstd[n] * (dy[base + c] * weight[c] - mean_g - xhat * mean_gxhat);
    }
  }
}

// dweight += sum_N dy * xhat,  dbias += sum_N dy.
// dy, x: (N, C)  mean, rstd: (N)  dweight, dbias: (C)
template <class T>
void layernorm_backward_weight(const T* dy, const T* x, const T* mean, const T* rstd,
                               T* dweight, T* dbias, uint32_t N, uint32_t C) {
  for (uint32_t n = 0; n < N; ++n)
    for (uint32_t c = 0; c < C; ++c) {
      const size_t i = size_t(n) * C + c;
      dweight[c] += dy[i] * (x[i] - mean[n]) * rstd[n];
      dbias[c] += dy[i];
    }
}

}  // namespace brigade::ref
