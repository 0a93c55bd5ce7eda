// CPU reference for BatchNorm2d over NCHW (HW = H * W). Argument order as ops/batchnorm.h,
// less the GPU's statistics accumulator: the reference computes the running-statistics
// update directly from the whole mini-batch, which is what the accumulator must reproduce.
#pragma once

#include <cmath>
#include <cstdint>

namespace brigade::ref {

// Mean and biased variance of channel c over N * HW values.
template <class T>
void batchnorm_channel_stats(const T* x, uint32_t N, uint32_t C, uint32_t HW, uint32_t c,
                             T& mean, T& var) {
  const T count = T(uint64_t(N) * HW);
  mean = 0, var = 0;
  for (uint32_t n = 0; n < N; ++n)
    for (uint32_t s = 0; s < HW; ++s) mean += x[(size_t(n) * C + c) * HW + s];
  mean /= count;
  for (uint32_t n = 0; n < N; ++n)
    for (uint32_t s = 0; s < HW; ++s) {
      const T d = x[(size_t(n) * C + c) * HW + s] - mean;
      var += d * d;
    }
  var /= count;
}

// Training: normalize with this batch's statistics.
// x, y: (N, C, HW)  weight, bias, mean, rstd: (C)
template <class T>
void batchnorm_forward_train(const T* x, const T* weight, const T* bias, T* y, T* mean,
                             T* rstd, uint32_t N, uint32_t C, uint32_t HW, T eps = T(1e-5)) {
  for (uint32_t c = 0; c < C; ++c) {
    T m, v;
    batchnorm_channel_stats(x, N, C, HW, c, m, v);
    const T r = T(1) / std::sqrt(v + eps);
    for (uint32_t n = 0; n < N; ++n)
      for (uint32_t s = 0; s < HW; ++s) {
        const size_t i = (size_t(n) * C + c) * HW + s;
        y[i] = (x[i] - m) * r * weight[c] + bias[c];
      }
    mean[c] = m;
    rstd[c] = r;
  }
}

// PyTorch's running-statistics rule for one training step on the whole mini-batch x:
// running = (1 - momentum) * running + momentum * batch, with the unbiased variance.
// x: (N, C, HW)  running_mean, running_var: (C)
template <class T>
void batchnorm_update_running(const T* x, T* running_mean, T* running_var, uint32_t N,
                              uint32_t C, uint32_t HW, T momentum = T(0.1)) {
  const T count = T(uint64_t(N) * HW);
  for (uint32_t c = 0; c < C; ++c) {
    T m, v;
    batchnorm_channel_stats(x, N, C, HW, c, m, v);
    running_mean[c] = momentum * m + (T(1) - momentum) * running_mean[c];
    running_var[c] = momentum * v * count / (count - T(1)) + (T(1) - momentum) * running_var[c];
  }
}

// Evaluation: normalize with the running statistics.
// x, y: (N, C, HW)  weight, bias, running_mean, running_var: (C)
template <class T>
void batchnorm_forward_eval(const T* x, const T* weight, const T* bias, const T* running_mean,
                            const T* running_var, T* y, uint32_t N, uint32_t C, uint32_t HW,
                            T eps = T(1e-5)) {
  for (uint32_t n = 0; n < N; ++n)
    for (uint32_t c = 0; c < C; ++c)
      for (uint32_t s = 0; s < HW; ++s) {
        const size_t i = (size_t(n) * C + c) * HW + s;
        y[i] = (x[i] - running_mean[c]) / std::sqrt(running_var[c] + eps) * weight[c] + bias[c];
      }
}

// Backward through the batch statistics (M = N * HW, xhat = (x - mean) * rstd):
// dbias += sum dy, dweight += sum dy * xhat,
// dx = weight * rstd * (dy - sum(dy) / M - xhat * sum(dy * xhat) / M).
// dy, x, dx: (N, C, HW)  weight, mean, rstd, dweight, dbias: (C)
template <class T>
void batchnorm_backward(const T* dy, const T* x, const T* weight, const T* mean, const T* rstd,
                        T* dx, T* dweight, T* dbias, uint32_t N, uint32_t C, uint32_t HW) {
  const T count = T(uint64_t(N) * HW);
  for (uint32_t c = 0; c < C; ++c) {
    T sum_dy = 0, sum_dy_xhat = 0;
    for (uint32_t n = 0; n < N; ++n)
      for (uint32_t s = 0; s < HW; ++s) {
        const size_t i = (size_t(n) * C + c) * HW + s;
        sum_dy += dy[i];
        sum_dy_xhat += dy[i] * (x[i] - mean[c]) * rstd[c];
      }
    dweight[c] += sum_dy_xhat;
    dbias[c] += sum_dy;
    for (uint32_t n = 0; n < N; ++n)
      for (uint32_t s = 0; s < HW; ++s) {
        const size_t i = (size_t(n) * C + c) * HW + s;
        const T xhat = (x[i] - mean[c]) * rstd[c];
        dx[i] = weight[c] * rstd[c] * (dy[i] - sum_dy / count - xhat * sum_dy_xhat / count);
      }
  }
}

}  // namespace brigade::ref
