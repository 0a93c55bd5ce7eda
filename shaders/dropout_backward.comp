#version 450
// dx += dy * mask / (1 - p), the mask redrawn from the forward's key.  dy, dx: (n)
#extension GL_GOOGLE_include_directive : require
#include "elementwise.h"

layout(local_size_x = BRIGADE_WG_ELEMENTWISE) in;
layout(binding = 0) readonly buffer DY { float dy[]; };
layout(binding = 1) buffer DX { float dx[]; };
layout(push_constant) uniform Push { DropoutPush p; };

void main() {
  const uint quads = (p.n + BRIGADE_DROPOUT_PER_THREAD - 1u) / BRIGADE_DROPOUT_PER_THREAD;
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint q = gl_GlobalInvocationID.x; q < quads; q += stride) {
    const uvec4 bits = dropout_words(p, q);
    for (uint j = 0u; j < BRIGADE_DROPOUT_PER_THREAD; ++j) {
      const uint i = q * BRIGADE_DROPOUT_PER_THREAD + j;
      if (i < p.n && uvec4_word(bits, j) >= p.threshold) dx[i] += dy[i] * p.scale;
    }
  }
}
