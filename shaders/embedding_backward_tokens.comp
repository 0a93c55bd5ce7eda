#version 450
// Token embedding gradient: dwte[v, :] += sum of dout[b, t, :] over the positions whose
// token is v (clamped into [0, V) as in the forward).
//   dout (B, T, C)  tokens (B, T) int32  ->  dwte (V, C), accumulated
// Deterministic without atomics: each invocation owns ROWS rows of one channel and scans all
// tokens in order, adding the positions that hit its rows. The scan is uniform across a
// workgroup (same tokens, same rows): one scalar load per token, and a uniform index into
// the accumulators. The launcher caps the grid's rows of workgroups (a vocabulary of more
// than 65535 groups of ROWS), and each workgroup walks the groups in steps of the grid.
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_EMBEDDING_TOKENS) in;
// Vocabulary rows per invocation; the launcher picks it per device.
layout(constant_id = 0) const uint ROWS = 32;

layout(binding = 0) readonly buffer DOut { float dout[]; };
layout(binding = 1) readonly buffer Tokens { int tokens[]; };
layout(binding = 2) buffer DWte { float dwte[]; };
layout(push_constant) uniform Push { EmbeddingPush p; };

void main() {
  const uint c = gl_GlobalInvocationID.x;
  if (c >= p.c) return;
  const uint positions = p.b * p.t;
  for (uint v0 = gl_WorkGroupID.y * ROWS; v0 < p.v; v0 += gl_NumWorkGroups.y * ROWS) {
    float acc[ROWS];
    for (uint r = 0; r < ROWS; ++r) acc[r] = 0.0;
    for (uint i = 0; i < positions; ++i) {
      const uint hit = uint(clamp(tokens[i], 0, int(p.v) - 1)) - v0;  // wraps when below v0
      if (hit < ROWS) acc[hit] += dout[i * p.c + c];
    }
    for (uint r = 0; r < ROWS && v0 + r < p.v; ++r) dwte[(v0 + r) * p.c + c] += acc[r];
  }
}
