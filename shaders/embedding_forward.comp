#version 450
// Token + position embedding: out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :].
//   tokens (B, T) int32  wte (V, C)  wpe (block_size >= T, C)  ->  out (B, T, C)
// A token outside [0, V) is clamped into it, so it cannot read past wte; rejecting such
// tokens is the data loader's job.
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_EMBEDDING) in;
layout(binding = 0) readonly buffer Tokens { int tokens[]; };
layout(binding = 1) readonly buffer Wte { float wte[]; };
layout(binding = 2) readonly buffer Wpe { float wpe[]; };
layout(binding = 3) writeonly buffer Out { float y[]; };
layout(push_constant) uniform Push { EmbeddingPush p; };

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= p.b * p.t * p.c) return;
  const uint bt = i / p.c, c = i % p.c, t = bt % p.t;
  const uint row = uint(clamp(tokens[bt], 0, int(p.v) - 1));
  y[i] = wte[row * p.c + c] + wpe[t * p.c + c];
}
