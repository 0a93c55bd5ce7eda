#version 450
// First level of the squared L2 norms of several gradients lying in one buffer (the tensors
// of a gradient arena, or one tensor): workgroup w (x + y * the grid's width, as the host
// folds the entries past a dispatch's width into rows) reads its entry of the table,
//   table[w] = (first, n, j, groups)
// and sums g[first + i]^2 over the elements i < n of its tensor that its invocation l visits,
//   i = (j * WG + l) + k * (groups * WG),  k = 0, 1, ...
// (four consecutive elements at each step where first and n are multiples of 4): the tensor's
// `groups` workgroups j = 0 .. groups-1 cover it. Each invocation sums its elements in order,
// then the workgroup adds its invocations' sums in a fixed order (shaders/workgroup_reduce.h):
// the result is deterministic, no atomics. The host adds each tensor's partials. The width WG
// is specialization constant 0, chosen per device (ops::reduction_width): one subgroup on CPU
// devices, so no barrier runs there.
// g: (the buffer)  table: (workgroups)  partial: (workgroups)
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "optim.h"
#include "workgroup_reduce.h"

layout(local_size_x_id = 0) in;
layout(binding = 0) readonly buffer Grad { float g[]; };
layout(binding = 0) readonly buffer Grad4 { vec4 g4[]; };
layout(binding = 1) readonly buffer Table { uvec4 table[]; };
layout(binding = 2) writeonly buffer Partial { float partial[]; };

void main() {
  const uint w = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (w >= table.length()) return;  // the last row's rest: the whole workgroup
  const uvec4 t = table[w];
  const uint first = t.x, n = t.y, stride = t.w * gl_WorkGroupSize.x;
  const uint start = t.z * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  float acc = 0.0;
  if (first % 4 == 0 && n % 4 == 0) {
    for (uint i = start; i < n / 4; i += stride) {
      const vec4 v = g4[first / 4 + i];
      acc += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
  } else {
    for (uint i = start; i < n; i += stride) acc += g[first + i] * g[first + i];
  }
  const float total = workgroup_sum(acc);
  if (gl_LocalInvocationIndex == 0) partial[w] = total;
}
