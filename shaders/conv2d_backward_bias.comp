#version 450
// Conv2d backward for the bias: dbias[oc] += sum over (n, oh, ow) of dy[n, oc, oh, ow].
//   dy (N, OC, OH, OW)  ->  dbias (OC), accumulated
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

layout(binding = 0) readonly buffer DY { float dy[]; };
layout(binding = 0) readonly buffer DY4 { vec4 dy4[]; };
layout(binding = 1) buffer DB { float db[]; };
layout(push_constant) uniform Push { Conv2dPush p; };

void main() {
  const uint tid = gl_LocalInvocationID.x, oc = gl_WorkGroupID.x, width = gl_WorkGroupSize.x;
  const uint ohw = p.oh * p.ow;
  float acc = 0.0;
  if (VEC4) {
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
