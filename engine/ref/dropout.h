// CPU reference for dropout. It draws its mask with the same Philox code the kernels run
// (shaders/elementwise.h) from the same push constants, so masks agree bit for bit.
// Argument order as ops/dropout.h.
#pragma once

#include <cstdint>

#include "shaders/elementwise.h"
#include "ops/dropout.h"

namespace brigade::ref {

// Whether element i survives under these push constants.
inline bool dropout_keep(const shaders::DropoutPush& p, uint32_t i) {
  const shaders::uvec4 words = shaders::dropout_words(p, i / BRIGADE_DROPOUT_PER_THREAD);
  return shaders::uvec4_word(words, i % BRIGADE_DROPOUT_PER_THREAD) >= p.threshold;
}

// y = x * mask / (1 - p).  x, y: (n)
template <class T>
void dropout_forward(const T* x, T* y, uint32_t n, float p, const ops::DropoutKey& key) {
  const shaders::DropoutPush push = ops::dropout_push(n, p, key);
  for (uint32_t i = 0; i < n; ++i) y[i] = dropout_keep(push, i) ? x[i] * T(push.scale) : T(0);
}

// dx += dy * mask / (1 - p).  dy, dx: (n)
template <class T>
void dropout_backward(const T* dy, T* dx, uint32_t n, float p, const ops::DropoutKey& key) {
  const shaders::DropoutPush push = ops::dropout_push(n, p, key);
  for (uint32_t i = 0; i < n; ++i)
    if (dropout_keep(push, i)) dx[i] += dy[i] * T(push.scale);
}

}  // namespace brigade::ref
