#version 450
// y = x * mask / (1 - p), the mask drawn from Philox keyed by (seed, step, micro-batch,
// layer, element) so backward and re-materialization redraw it instead of storing it.
// x, y: (n)
#extension GL_GOOGLE_include_directive : require
#include "elementwise.h"

layout(local_size_x = BRIGADE_WG_ELEMENTWISE) in;
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Push { DropoutPush p; };

void main() {
  const uint quads = (p.n + BRIGADE_DROPOUT_PER_THREAD - 1u) / BRIGADE_DROPOUT_PER_THREAD;
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint q = gl_GlobalInvocationID.x; q < quads; q += stride) {
    const uvec4 bits = dropout_words(p, q);
    for (uint j = 0u; j < BRIGADE_DROPOUT_PER_THREAD; ++j) {
      const uint i = q * BRIGADE_DROPOUT_PER_THREAD + j;
      if (i < p.n) y[i] = uvec4_word(bits, j) >= p.threshold ? x[i] * p.scale : 0.0;
    }
  }
}
