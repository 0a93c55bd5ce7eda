#version 450
// Token + position embedding: out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :].
//   tokens (B, T) int32  wte (V, C)  wpe (block_size >= T, C)  ->  out (B, T, C)
// A workgroup covers POSITIONS consecutive positions with its invocations along C, so the
// token load is uniform and rows are read contiguously. A token outside [0, V) is clamped
// into it and cannot read past wte; rejecting such tokens is the data loader's job.
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_EMBEDDING) in;
layout(binding = 0) readonly buffer Tokens { int tokens[]; };
layout(binding = 1) readonly buffer Wte { float wte[]; };
layout(binding = 2) readonly buffer Wpe { float wpe[]; };
layout(binding = 3) writeonly buffer Out { float y[]; };
layout(push_constant) uniform Push { EmbeddingPush p; };

void main() {
  const uint first = gl_WorkGroupID.x * BRIGADE_EMBEDDING_POSITIONS;
  const uint last = min(first + BRIGADE_EMBEDDING_POSITIONS, p.b * p.t);
  for (uint bt = first; bt < last; ++bt) {
    const uint row = uint(clamp(tokens[bt], 0, int(p.v) - 1)), t = bt % p.t;
    for (uint c = gl_LocalInvocationID.x; c < p.c; c += BRIGADE_WG_EMBEDDING)
      y[bt * p.c + c] = wte[row * p.c + c] + wpe[t * p.c + c];
  }
}
