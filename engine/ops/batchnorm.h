// BatchNorm2d over NCHW, as torch.nn.BatchNorm2d(C) (eps 1e-5, momentum 0.1, affine), with
// GPipe's semantics:
//  - a training forward normalizes each MICRO-batch with its own statistics (biased
//    variance) and merges them into a per-channel accumulator (count, mean, M2);
//  - once per mini-batch, batchnorm_update_running moves running_mean / running_var by one
//    momentum step towards the whole mini-batch's mean and unbiased variance, exactly what
//    PyTorch does when it sees the full mini-batch, and clears the accumulator;
//  - evaluation normalizes with the running statistics.
// The backward writes dx whole and accumulates (+=) into dweight and dbias.
// x and y may be kept in 16 bits, read and written by the kernels themselves (a 16-bit y where
// H * W is even): the forwards' as Formats says, the backward's x as x_format says; the
// backward rounds dx's sums to dx_round (a layer's input gradient is kept at its input's
// precision). The statistics, the parameters and their gradients, dy and every sum stay fp32.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ops/precision.h"
#include "vk/commands.h"

namespace brigade::ops {

// `stats` is (C) shaders::BatchNormStats, 12 bytes each; zero-filled means empty.
// `accumulate` is false when re-materialization recomputes a forward already counted.
// Throws UserError when N * HW < 2 (PyTorch: "Expected more than 1 value per channel").
// x, y: (N, C, HW)  weight, bias, mean, rstd: (C)
void batchnorm_forward_train(vk::Commands& cmd, vk::View x, vk::View weight, vk::View bias,
                             vk::View y, vk::View mean, vk::View rstd, vk::View stats,
                             uint32_t N, uint32_t C, uint32_t HW, bool accumulate,
                             float eps = 1e-5f, Formats f = {});
// Once per mini-batch, after its last micro-batch's training forward.
// stats: (C) BatchNormStats  running_mean, running_var: (C)
// The statistics accumulator (shaders::BatchNormStats per channel: count, mean, M2) as
// three sums per channel that add across data-parallel replicas (count, count x mean,
// M2 + count x mean^2), and back: the accumulator of all their micro-batches together.
std::vector<double> batchnorm_stats_to_sums(std::span<const float> words);
void batchnorm_stats_from_sums(std::span<const double> sums, std::span<float> words);

void batchnorm_update_running(vk::Commands& cmd, vk::View stats, vk::View running_mean,
                              vk::View running_var, uint32_t C, float momentum = 0.1f);
// x, y: (N, C, HW)  weight, bias, running_mean, running_var: (C)
void batchnorm_forward_eval(vk::Commands& cmd, vk::View x, vk::View weight, vk::View bias,
                            vk::View running_mean, vk::View running_var, vk::View y,
                            uint32_t N, uint32_t C, uint32_t HW, float eps = 1e-5f, Formats f = {});
// Backward through the micro-batch statistics; one kernel computes all three gradients.
// The training kernels walk each channel a quad of a plane at a time where H * W is a multiple
// of 4 and every view 16-byte aligned (a pair where it is even).
// dy, x, dx: (N, C, HW)  weight, mean, rstd: (C) from the forward  dweight, dbias: (C)
void batchnorm_backward(vk::Commands& cmd, vk::View dy, vk::View x, vk::View weight,
                        vk::View mean, vk::View rstd, vk::View dx, vk::View dweight,
                        vk::View dbias, uint32_t N, uint32_t C, uint32_t HW,
                        Precision x_format = Precision::Fp32, Precision dx_round = Precision::Fp32);

}  // namespace brigade::ops
