#version 450
// First level of the squared L2 norm of a gradient: workgroup w writes the sum of g[i]^2 over
// the elements its invocations visit, invocation l of workgroup w visiting
//   i = (w * WG + l) + k * (groups * WG),  k = 0, 1, ...
// (four consecutive elements at each step with VEC4: n % 4 == 0 and g 16-byte aligned).
// Each invocation sums its elements in order, then the workgroup adds its invocations' sums
// in a fixed order (shaders/workgroup_reduce.h): the result is deterministic, no atomics. The
// host adds the partials. The width WG is specialization constant 0, chosen per device
// (ops::reduction_width): one subgroup on CPU devices, so no barrier runs there.
// g: (n)  partial: (groups)
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "optim.h"
#include "workgroup_reduce.h"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool VEC4 = false;
layout(binding = 0) readonly buffer Grad { float g[]; };
layout(binding = 0) readonly buffer Grad4 { vec4 g4[]; };
layout(binding = 1) writeonly buffer Partial { float partial[]; };
layout(push_constant) uniform Push { GradNormPush p; };

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  float acc = 0.0;
  if (VEC4) {
    for (uint i = gl_GlobalInvocationID.x; i < p.n / 4; i += stride) {
      const vec4 v = g4[i];
      acc += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
  } else {
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) acc += g[i] * g[i];
  }
  const float total = workgroup_sum(acc);
  if (gl_LocalInvocationIndex == 0) partial[gl_WorkGroupID.x] = total;
}
