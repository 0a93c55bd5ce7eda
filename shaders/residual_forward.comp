#version 450
// y = a + b, the residual connection.  a, b, y: (n)
// VEC4: four elements per invocation, as in relu_forward.comp.
// FORMAT_A, FORMAT_Y: how a and y are stored (shaders/formats.glsl), 16 bits only with VEC4
// (a quad being two words; the launcher proves it); b is fp32.
#extension GL_GOOGLE_include_directive : require
#include "elementwise.h"
#include "formats.glsl"

layout(local_size_x = BRIGADE_WG_ELEMENTWISE) in;
layout(constant_id = 0) const bool VEC4 = false;
BRIGADE_FORMAT(1, FORMAT_A);
BRIGADE_FORMAT(2, FORMAT_Y);
layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 0) readonly buffer A4 { vec4 a4[]; };
layout(binding = 0) readonly buffer AW2 { uvec2 aw2[]; };
layout(binding = 1) readonly buffer B { float b[]; };
layout(binding = 1) readonly buffer B4 { vec4 b4[]; };
layout(binding = 2) writeonly buffer Y { float y[]; };
layout(binding = 2) writeonly buffer Y4 { vec4 y4[]; };
layout(binding = 2) writeonly buffer YW2 { uvec2 yw2[]; };
layout(push_constant) uniform Push { ElementwisePush p; };

vec4 a_quad(uint q) {
  if (FORMAT_A == BRIGADE_FORMAT_FP32) return a4[q];
  return quad_in(aw2[q], FORMAT_A);
}

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (VEC4) {
    for (uint i = gl_GlobalInvocationID.x; i < p.n / 4; i += stride) {
      const vec4 v = a_quad(i) + b4[i];
      if (FORMAT_Y == BRIGADE_FORMAT_FP32) y4[i] = v;
      else yw2[i] = quad_out(v, FORMAT_Y);
    }
    return;
  }
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) y[i] = a[i] + b[i];
}
