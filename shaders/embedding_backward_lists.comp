#version 450
// Token embedding gradient from each vocabulary row's list of positions
// (embedding_token_lists.comp): dwte[v, :] += the sum of dout[i, :] over v's positions i.
//   dout (B, T, C)  lists (counts, starts, positions)  ->  dwte (V, C), accumulated
// An invocation a (row, column) pair, summing from 0 in increasing position order, then added
// to what dwte held: embedding_backward_tokens.comp's sums, bit for bit. A row's positions are
// read BATCH at a time, all their values loaded before any is added, so that a row of thousands
// of positions (a byte vocabulary's space) keeps BATCH loads in flight, not one: on an H200 the
// walk one position at a time took 2.19 ms of gpt2-small's bf16 step. The adds keep their order.
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_EMBEDDING_TOKENS) in;
const uint BATCH = 8;

layout(binding = 0) readonly buffer DOut { float dout[]; };
layout(binding = 1) readonly buffer Lists { uint lists[]; };
layout(binding = 2) buffer DWte { float dwte[]; };
layout(push_constant) uniform Push { EmbeddingPush p; };

void main() {
  const uint c = gl_GlobalInvocationID.x, v = gl_WorkGroupID.y;
  if (c >= p.c) return;
  const uint first = 2 * p.v + lists[p.v + v], count = lists[v];
  float acc = 0.0;
  uint k = 0;
  for (; k + BATCH <= count; k += BATCH) {
    float values[BATCH];
    for (uint j = 0; j < BATCH; ++j) values[j] = dout[lists[first + k + j] * p.c + c];
    for (uint j = 0; j < BATCH; ++j) acc += values[j];
  }
  for (; k < count; ++k) acc += dout[lists[first + k] * p.c + c];
  dwte[v * p.c + c] += acc;
}
