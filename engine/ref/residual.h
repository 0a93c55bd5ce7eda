// CPU reference for the residual add. Argument order as ops/residual.h.
#pragma once

#include <cstdint>

namespace brigade::ref {

// y = a + b.  a, b, y: (n)
template <class T>
void residual_forward(const T* a, const T* b, T* y, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

// da += dy, db += dy.  dy, da, db: (n)
template <class T>
void residual_backward(const T* dy, T* da, T* db, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) da[i] += dy[i], db[i] += dy[i];
}

}  // namespace brigade::ref
