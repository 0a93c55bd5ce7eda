#version 450
// Position embedding gradient: dwpe[t, :] += sum over b of dout[b, t, :].
//   dout (B, T, C)  ->  dwpe (block_size >= T, C), accumulated in its first T rows
// One invocation per (t, c), summing the batch in order: deterministic, no atomics. The
// launcher caps the grid (a model's T * C can pass a dispatch's limit), and each invocation
// walks the (t, c) in steps of the grid.
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_EMBEDDING) in;
layout(binding = 0) readonly buffer DOut { float dout[]; };
layout(binding = 1) buffer DWpe { float dwpe[]; };
layout(push_constant) uniform Push { EmbeddingPush p; };

void main() {
  const uint tc = p.t * p.c;
  for (uint i = gl_GlobalInvocationID.x; i < tc; i += gl_NumWorkGroups.x * BRIGADE_WG_EMBEDDING) {
    float acc = 0.0;
    for (uint b = 0; b < p.b; ++b) acc += dout[b * tc + i];
    dwpe[i] += acc;
  }
}
