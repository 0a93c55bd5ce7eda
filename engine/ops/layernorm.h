// LayerNorm over the last dimension C, as torch.nn.LayerNorm(C) (eps 1e-5, affine).
// Forward saves each row's mean and rstd = 1 / sqrt(var + eps) for the backward passes;
// backward passes accumulate (+=) into dx, dweight and dbias.
// x and y may be kept in 16 bits, read and written by the kernels themselves where C % 4 == 0
// and the views are 16-byte aligned: the forward's as Formats says, the backward passes' x as
// x_format says; backward-data rounds dx's sums to dx_round (a layer's input gradient is kept
// at its input's precision; a GPT block's internal gradients stay fp32).
#pragma once

#include <cstdint>
#include <optional>

#include "ops/column_sums.h"
#include "ops/precision.h"
#include "vk/commands.h"

namespace brigade::ops {

// x, y: (N, C)  weight, bias: (C)  mean, rstd: (N)
void layernorm_forward(vk::Commands& cmd, vk::View x, vk::View weight, vk::View bias,
                       vk::View y, vk::View mean, vk::View rstd, uint32_t N, uint32_t C,
                       float eps = 1e-5f, Formats f = {});
// dx += dL/dx.  dy, x, dx: (N, C)  weight: (C)  mean, rstd: (N) from the forward
// Around the pass (LayerNormGrad): with `residual`, dx = residual + dL/dx instead (the
// gradient of a residual branch's input, dx never read); with `copy`, dx as this pass leaves it
// is also packed there in copy_format (rounded; needs C % 4 == 0 and 16-byte aligned views): a
// gradient packed for the products that read it.
struct LayerNormGrad {
  std::optional<vk::View> residual, copy;
  Precision copy_format = Precision::Fp32;
};
void layernorm_backward_data(vk::Commands& cmd, vk::View dy, vk::View x, vk::View weight,
                             vk::View mean, vk::View rstd, vk::View dx, uint32_t N,
                             uint32_t C, Precision x_format = Precision::Fp32,
                             Precision dx_round = Precision::Fp32, const LayerNormGrad& around = {});
// dweight += sum_N dy * xhat,  dbias += sum_N dy, walked as `walk` says (ops/column_sums.h).
// dy, x: (N, C)  mean, rstd: (N) from the forward  dweight, dbias: (C)
void layernorm_backward_weight(vk::Commands& cmd, vk::View dy, vk::View x, vk::View mean,
                               vk::View rstd, vk::View dweight, vk::View dbias, uint32_t N,
                               uint32_t C, ColumnWalk walk = {}, Precision x_format = Precision::Fp32);

}  // namespace brigade::ops
