#version 450
// One torch.optim.AdamW update (amsgrad off), element-wise:
//   param *= 1 - lr * weight_decay
//   g = grad * grad_scale
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2
//   param -= step_size * m / (sqrt(v) / bias2_sqrt + eps)
// with step_size = lr / (1 - beta1^t) and bias2_sqrt = sqrt(1 - beta2^t), from the host.
// param: (n)  grad: (n)  m: (n)  v: (n)
#extension GL_GOOGLE_include_directive : require
#include "optim.h"

layout(local_size_x = BRIGADE_WG_OPTIM) in;
// With VEC4 (n % 4 == 0, every view 16-byte aligned) an invocation updates four consecutive
// elements through vec4 loads and stores, the same arithmetic per element: on a CPU driver a
// load costs a loop over the lanes, so a vec4 costs about what one float does.
layout(constant_id = 0) const bool VEC4 = false;
layout(binding = 0) buffer Param { float param[]; };
layout(binding = 0) buffer Param4 { vec4 param4[]; };
layout(binding = 1) readonly buffer Grad { float grad[]; };
layout(binding = 1) readonly buffer Grad4 { vec4 grad4[]; };
layout(binding = 2) buffer ExpAvg { float exp_avg[]; };
layout(binding = 2) buffer ExpAvg4 { vec4 exp_avg4[]; };
layout(binding = 3) buffer ExpAvgSq { float exp_avg_sq[]; };
layout(binding = 3) buffer ExpAvgSq4 { vec4 exp_avg_sq4[]; };
layout(push_constant) uniform Push { AdamWPush p; };

// One update of the elements in `param` (a float or a vec4), in torch's order of operations:
// the denominator is corrected, not v itself.
#define ADAMW_UPDATE(T, param, grad, exp_avg, exp_avg_sq)              \
  {                                                                    \
    const T w = param * p.decay;                                       \
    const T g = grad * p.grad_scale;                                   \
    const T m = p.beta1 * exp_avg + p.one_minus_beta1 * g;             \
    const T v = p.beta2 * exp_avg_sq + p.one_minus_beta2 * (g * g);    \
    exp_avg = m;                                                       \
    exp_avg_sq = v;                                                    \
    const T denom = sqrt(v) / p.bias2_sqrt + p.eps;                    \
    param = w - p.step_size * (m / denom);                             \
  }

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;  // the launcher caps the groups
  if (VEC4) {
    for (uint i = gl_GlobalInvocationID.x; i < p.n / 4; i += stride)
      ADAMW_UPDATE(vec4, param4[i], grad4[i], exp_avg4[i], exp_avg_sq4[i])
  } else {
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride)
      ADAMW_UPDATE(float, param[i], grad[i], exp_avg[i], exp_avg_sq[i])
  }
}
