// Push constants and workgroup sizes of the optimizer family (SGD, AdamW, gradient-norm
// clipping), shared by the GLSL kernels and their C++ launchers in engine/optim/.
// Plain 32-bit scalars only, so std430 push-constant layout and C++ layout agree.
#ifndef BRIGADE_SHADERS_OPTIM_H
#define BRIGADE_SHADERS_OPTIM_H

#ifdef __cplusplus
#include <cstdint>
namespace brigade::shaders {
using uint = std::uint32_t;
#endif

// Threads per workgroup of the element-wise update kernels (sgd_step, adamw_step, scale).
#define BRIGADE_WG_OPTIM 256
// grad_norm_partial uses at most this many workgroups (partial sums per tensor), and one per
// BRIGADE_NORM_GROUP_ITEMS elements below that; each workgroup writes one partial sum. Its
// width is the device's reduction width (ops::reduction_width).
#define BRIGADE_NORM_MAX_GROUPS 256
#define BRIGADE_NORM_GROUP_ITEMS 4096

// sgd_step (torch.optim.SGD, dampening 0). Specialization constants: 0 = momentum on,
// 1 = Nesterov. lr, weight_decay and grad_scale come from the host per step.
struct SgdPush {
  uint n;
  float lr;
  float momentum;
  float weight_decay;
  float grad_scale;  // clip coefficient applied to the gradient as it is read
  uint first;        // 1 on the first step: the momentum buffer is set to the gradient
};

// adamw_step (torch.optim.AdamW, amsgrad off). The bias corrections are folded in on the
// host (in double): step_size = lr / (1 - beta1^t), bias2_sqrt = sqrt(1 - beta2^t).
struct AdamWPush {
  uint n;
  float decay;            // 1 - lr * weight_decay
  float beta1;
  float one_minus_beta1;
  float beta2;
  float one_minus_beta2;
  float eps;
  float step_size;
  float bias2_sqrt;
  float grad_scale;
};

// scale: x[i] *= alpha.
struct ScalePush {
  uint n;
  float alpha;
};

#ifdef __cplusplus
}  // namespace brigade::shaders
#endif
#endif
