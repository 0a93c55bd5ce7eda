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
layout(binding = 0) buffer Param { float param[]; };
layout(binding = 1) readonly buffer Grad { float grad[]; };
layout(binding = 2) buffer ExpAvg { float exp_avg[]; };
layout(binding = 3) buffer ExpAvgSq { float exp_avg_sq[]; };
layout(push_constant) uniform Push { AdamWPush p; };

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= p.n) return;
  const float w = param[i] * p.decay;
  const float g = grad[i] * p.grad_scale;
  const float m = p.beta1 * exp_avg[i] + p.one_minus_beta1 * g;
  const float v = p.beta2 * exp_avg_sq[i] + p.one_minus_beta2 * (g * g);
  exp_avg[i] = m;
  exp_avg_sq[i] = v;
  // Same order of operations as torch: the denominator is corrected, not v itself.
  const float denom = sqrt(v) / p.bias2_sqrt + p.eps;
  param[i] = w - p.step_size * (m / denom);
}
