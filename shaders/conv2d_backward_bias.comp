#version 450
// Conv2d backward for the bias: dbias[oc] += sum over (n, oh, ow) of dy[n, oc, oh, ow].
//   dy (N, OC, OH, OW)  ->  dbias (OC), accumulated
// With POOL (the TILE of the codes, 0 without), dy is the gradient of the ReLU and 2x2
// pooling folded into the convolution (ops/conv2d_pool.h), (N, OC, OH / 2, OW / 2), and each
// pooled gradient counts where its window's code names an element (the others' gradient
// stops at the ReLU): the same terms as the spread-back gradient's, without its zeros.
// One workgroup per output channel; its invocations stride over the pixels (four at a time
// with VEC4: OH*OW % 4 == 0 and dy 16-byte aligned) and the workgroup adds their sums in a
// fixed order (shaders/workgroup_reduce.h): deterministic, no float atomics. The width is
// specialization constant 0 (ops::reduction_width): one subgroup and no barrier on CPU
// devices.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "conv.h"
#include "workgroup_reduce.h"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool VEC4 = false;
layout(constant_id = 2) const uint POOL = 0;

layout(binding = 0) readonly buffer DY { float dy[]; };
layout(binding = 0) readonly buffer DY4 { vec4 dy4[]; };
layout(binding = 1) buffer DB { float db[]; };
layout(binding = 2) readonly buffer Codes { uint codes[]; };
layout(push_constant) uniform Push { Conv2dPush p; };

void main() {
  const uint tid = gl_LocalInvocationID.x, oc = gl_WorkGroupID.x, width = gl_WorkGroupSize.x;
  const uint ohw = p.oh * p.ow;
  float acc = 0.0;
  if (POOL != 0u) {
    const uint poh = p.oh / 2u, pow_ = p.ow / 2u, half_ = POOL / 2u;
    const uint tw = (p.ow + POOL - 1u) / POOL, tiles = ((p.oh + POOL - 1u) / POOL) * tw;
    for (uint n = 0; n < p.n; ++n) {
      const uint plane = n * p.oc + oc;
      for (uint s = tid; s < poh * pow_; s += width) {
        const uint py = s / pow_, px = s % pow_;
        const uint tile = (2u * py / POOL) * tw + 2u * px / POOL, window = (py % half_) * half_ + px % half_;
        const uint code = (codes[plane * tiles + tile] >> (4u * window)) & 0xFu;
        acc += code < 4u ? dy[plane * poh * pow_ + s] : 0.0;
      }
    }
  } else if (VEC4) {
    vec4 acc4 = vec4(0.0);
    for (uint n = 0; n < p.n; ++n) {
      const uint plane = (n * p.oc + oc) * ohw / 4;
      for (uint s = tid; s < ohw / 4; s += width) acc4 += dy4[plane + s];
    }
    acc = lanes_total(acc4);
  } else {
    for (uint n = 0; n < p.n; ++n) {
      const uint plane = (n * p.oc + oc) * ohw;
      for (uint s = tid; s < ohw; s += width) acc += dy[plane + s];
    }
  }
  const float total = workgroup_sum(acc);
  if (tid == 0) db[oc] += total;
}
