// CPU references for ReLU and GELU (tanh approximation): plain loops, templated on the
// scalar type so the finite-difference checks run in double. Argument order as ops/.
#pragma once

#include <cmath>
#include <cstdint>

namespace brigade::ref {

// x, y: (n)
template <class T>
void relu_forward(const T* x, T* y, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) y[i] = x[i] < T(0) ? T(0) : x[i];
}

// dx = dy where y > 0, else 0.  y, dy, dx: (n)
template <class T>
void relu_backward(const T* y, const T* dy, T* dx, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) dx[i] = y[i] > T(0) ? dy[i] : T(0);
}

template <class T>
constexpr T gelu_beta = T(0.7978845608028654);  // sqrt(2 / pi)
template <class T>
constexpr T gelu_kappa = T(0.044715);

// y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).  x, y: (n)
template <class T>
void gelu_forward(const T* x, T* y, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    const T v = x[i];
    y[i] = T(0.5) * v * (T(1) + std::tanh(gelu_beta<T> * (v + gelu_kappa<T> * v * v * v)));
  }
}

// dx += dy * gelu'(x).  x, dy, dx: (n)
template <class T>
void gelu_backward(const T* x, const T* dy, T* dx, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    const T v = x[i];
    const T t = std::tanh(gelu_beta<T> * (v + gelu_kappa<T> * v * v * v));
    const T du = gelu_beta<T> * (T(1) + T(3) * gelu_kappa<T> * v * v);
    dx[i] += dy[i] * (T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * du);
  }
}

}  // namespace brigade::ref
