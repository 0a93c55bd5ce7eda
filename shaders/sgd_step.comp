#version 450
// One torch.optim.SGD update (dampening 0), element-wise:
//   g = grad * grad_scale + weight_decay * param
//   momentum: buf = g on the first step, else buf = momentum * buf + g
//             g = Nesterov ? g + momentum * buf : buf
//   param -= lr * g
// param: (n)  grad: (n)  momentum_buffer: (n), untouched when MOMENTUM is off.
#extension GL_GOOGLE_include_directive : require
#include "optim.h"

layout(constant_id = 0) const bool MOMENTUM = false;
layout(constant_id = 1) const bool NESTEROV = false;

layout(local_size_x = BRIGADE_WG_OPTIM) in;
layout(binding = 0) buffer Param { float param[]; };
layout(binding = 1) readonly buffer Grad { float grad[]; };
layout(binding = 2) buffer Momentum { float momentum_buffer[]; };
layout(push_constant) uniform Push { SgdPush p; };

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;  // the launcher caps the groups
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
    const float w = param[i];
    float g = grad[i] * p.grad_scale;
    // Skipped at 0 as torch does, so a non-finite parameter does not leak into g.
    if (p.weight_decay != 0.0) g += p.weight_decay * w;
    if (MOMENTUM) {
      const float buf = p.first != 0 ? g : p.momentum * momentum_buffer[i] + g;
      momentum_buffer[i] = buf;
      g = NESTEROV ? g + p.momentum * buf : buf;
    }
    param[i] = w - p.lr * g;
  }
}
