// CPU reference for softmax cross-entropy with a mini-batch mean. Argument order as
// ops/cross_entropy.h, less the GPU's per-row scratch.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace brigade::ref {

// loss += sum_rows -log softmax(logits)[target] / N_total.
// logits: (N, V)  targets: (N)
template <class T>
void cross_entropy_forward(const T* logits, const int32_t* targets, T& loss, uint32_t N,
                           uint32_t V, uint32_t N_total) {
  T sum = 0;
  for (uint32_t n = 0; n < N; ++n) {
    const T* row = logits + size_t(n) * V;
    T top = -std::numeric_limits<T>::infinity(), s = 0;
    for (uint32_t v = 0; v < V; ++v) top = std::max(top, row[v]);
    for (uint32_t v = 0; v < V; ++v) s += std::exp(row[v] - top);
    sum += (top - row[targets[n]]) + std::log(s);
  }
  loss += sum / T(N_total);
}

// dlogits = (softmax(logits) - onehot(target)) / N_total (written).
// logits, dlogits: (N, V)  targets: (N)
template <class T>
void cross_entropy_backward(const T* logits, const int32_t* targets, T* dlogits, uint32_t N,
                            uint32_t V, uint32_t N_total) {
  for (uint32_t n = 0; n < N; ++n) {
    const T* row = logits + size_t(n) * V;
    T top = -std::numeric_limits<T>::infinity(), s = 0;
    for (uint32_t v = 0; v < V; ++v) top = std::max(top, row[v]);
    for (uint32_t v = 0; v < V; ++v) s += std::exp(row[v] - top);
    for (uint32_t v = 0; v < V; ++v)
      dlogits[size_t(n) * V + v] =
          (std::exp(row[v] - top) / s - (int32_t(v) == targets[n] ? T(1) : T(0))) / T(N_total);
  }
}

// correct += rows whose first maximum is at the target, as torch.argmax: a NaN above every
// number (the first NaN where there are several).  logits: (N, V)  targets: (N)
template <class T>
void cross_entropy_accuracy(const T* logits, const int32_t* targets, uint32_t& correct,
                            uint32_t N, uint32_t V) {
  for (uint32_t n = 0; n < N; ++n) {
    const T* row = logits + size_t(n) * V;
    uint32_t best = 0;
    for (uint32_t v = 1; v < V && !std::isnan(row[best]); ++v)
      if (std::isnan(row[v]) || row[v] > row[best]) best = v;
    correct += int32_t(best) == targets[n];
  }
}

}  // namespace brigade::ref
