// CPU references of the optimizer family, plain loops, templated on the scalar type so the
// tests run them in double. Same argument order as the launchers in engine/optim/.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/sgd.h"

namespace brigade::ref {

// torch.optim.SGD, dampening 0.  param, grad, momentum_buffer: (n)
template <class T>
void sgd_step(std::span<T> param, std::span<const T> grad, std::span<T> momentum_buffer, uint32_t n,
              const optim::SgdOptions& o, const optim::Step& step) {
  const T lr = T(step.lr), mu = T(o.momentum), wd = T(o.weight_decay), s = T(step.grad_scale);
  for (uint32_t i = 0; i < n; ++i) {
    T g = grad[i] * s + wd * param[i];
    if (o.momentum != 0) {
      T& buf = momentum_buffer[i];
      buf = step.t == 1 ? g : mu * buf + g;
      g = o.nesterov ? g + mu * buf : buf;
    }
    param[i] -= lr * g;
  }
}

// torch.optim.AdamW, amsgrad off.  param, grad, exp_avg, exp_avg_sq: (n)
template <class T>
void adamw_step(std::span<T> param, std::span<const T> grad, std::span<T> exp_avg,
                std::span<T> exp_avg_sq, uint32_t n, const optim::AdamWOptions& o,
                const optim::Step& step) {
  const T b1 = T(o.beta1), b2 = T(o.beta2), lr = T(step.lr), s = T(step.grad_scale);
  const T bias1 = T(1) - std::pow(b1, T(step.t)), bias2 = T(1) - std::pow(b2, T(step.t));
  for (uint32_t i = 0; i < n; ++i) {
    const T g = grad[i] * s;
    param[i] *= T(1) - lr * T(o.weight_decay);
    exp_avg[i] = b1 * exp_avg[i] + (T(1) - b1) * g;
    exp_avg_sq[i] = b2 * exp_avg_sq[i] + (T(1) - b2) * g * g;
    const T m_hat = exp_avg[i] / bias1, v_hat = exp_avg_sq[i] / bias2;
    param[i] -= lr * m_hat / (std::sqrt(v_hat) + T(o.eps));
  }
}

// Sum of grad[i]^2.  grad: (n)
template <class T>
T squared_norm(std::span<const T> grad, uint32_t n) {
  T sum = 0;
  for (uint32_t i = 0; i < n; ++i) sum += grad[i] * grad[i];
  return sum;
}

// x *= alpha.  x: (n)
template <class T>
void scale(std::span<T> x, uint32_t n, T alpha) {
  for (uint32_t i = 0; i < n; ++i) x[i] *= alpha;
}

}  // namespace brigade::ref
