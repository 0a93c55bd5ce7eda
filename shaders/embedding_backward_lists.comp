#version 450
// Token embedding gradient from each vocabulary row's list of positions
// (embedding_token_lists.comp): dwte[v, :] += the sum of dout[i, :] over v's positions i.
//   dout (B, T, C)  lists (counts, starts, positions)  ->  dwte (V, C), accumulated
// An invocation a (row, column) pair, summing from 0 in increasing position order, then added
// to what dwte held: embedding_backward_tokens.comp's sums, bit for bit.
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_EMBEDDING_TOKENS) in;

layout(binding = 0) readonly buffer DOut { float dout[]; };
layout(binding = 1) readonly buffer Lists { uint lists[]; };
layout(binding = 2) buffer DWte { float dwte[]; };
layout(push_constant) uniform Push { EmbeddingPush p; };

void main() {
  const uint c = gl_GlobalInvocationID.x, v = gl_WorkGroupID.y;
  if (c >= p.c) return;
  const uint first = 2 * p.v + lists[p.v + v], count = lists[v];
  float acc = 0.0;
  for (uint k = 0; k < count; ++k) acc += dout[lists[first + k] * p.c + c];
  dwte[v * p.c + c] += acc;
}
