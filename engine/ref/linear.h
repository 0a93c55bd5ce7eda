// CPU reference of ops::linear_*: plain loops, templated on the scalar type so the
// finite-difference checks run it in double. An empty bias span means no bias.
//   x (N,IN)   weight (OUT,IN)   bias (OUT)   y (N,OUT)
#pragma once

#include <cstdint>
#include <span>

namespace brigade::ref {

// y = x weight^T + bias
template <class T>
void linear_forward(std::span<const T> x, std::span<const T> weight, std::span<const T> bias,
                    std::span<T> y, uint32_t n, uint32_t in, uint32_t out) {
  for (uint64_t r = 0; r < n; ++r)
    for (uint64_t o = 0; o < out; ++o) {
      T sum = bias.empty() ? T(0) : bias[o];
      for (uint64_t i = 0; i < in; ++i) sum += x[r * in + i] * weight[o * in + i];
      y[r * out + o] = sum;
    }
}

// dx += dy weight
template <class T>
void linear_backward_data(std::span<const T> dy, std::span<const T> weight, std::span<T> dx,
                          uint32_t n, uint32_t in, uint32_t out) {
  for (uint64_t r = 0; r < n; ++r)
    for (uint64_t i = 0; i < in; ++i) {
      T sum = 0;
      for (uint64_t o = 0; o < out; ++o) sum += dy[r * out + o] * weight[o * in + i];
      dx[r * in + i] += sum;
    }
}

// dweight += dy^T x, dbias += the column sums of dy
template <class T>
void linear_backward_weight(std::span<const T> dy, std::span<const T> x, std::span<T> dweight,
                            std::span<T> dbias, uint32_t n, uint32_t in, uint32_t out) {
  for (uint64_t o = 0; o < out; ++o) {
    for (uint64_t i = 0; i < in; ++i) {
      T sum = 0;
      for (uint64_t r = 0; r < n; ++r) sum += dy[r * out + o] * x[r * in + i];
      dweight[o * in + i] += sum;
    }
    if (dbias.empty()) continue;
    T sum = 0;
    for (uint64_t r = 0; r < n; ++r) sum += dy[r * out + o];
    dbias[o] += sum;
  }
}

}  // namespace brigade::ref
