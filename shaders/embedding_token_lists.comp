#version 450
// The positions of each vocabulary row, listed in order for the token gradient's sums
// (embedding_backward_lists.comp): a GPU's way to embedding_backward_tokens.comp's sums
// without every column of every row scanning every token.
//   tokens (B, T) int32  ->  lists (uints): counts (V), starts (V), then the B*T positions
// A workgroup per vocabulary row v (tokens clamped into [0, V) as in the forward).
// PHASE 0: counts[v], how many positions hold v.
// PHASE 1 (after 0): starts[v], the counts of the rows before v; then v's positions in
//   increasing order from positions[starts[v]] on: each invocation takes a contiguous chunk of
//   the positions, and its matches follow those of the chunks before it.
// Counts are integers, so their sums in any order are exact.
#extension GL_GOOGLE_include_directive : require
#include "conv.h"

layout(local_size_x = BRIGADE_WG_EMBEDDING_LISTS) in;
layout(constant_id = 0) const uint PHASE = 0;

layout(binding = 0) readonly buffer Tokens { int tokens[]; };
layout(binding = 1) buffer Lists { uint lists[]; };
layout(push_constant) uniform Push { EmbeddingPush p; };

const uint WG = BRIGADE_WG_EMBEDDING_LISTS;
shared uint total;
shared uint before[WG];  // each invocation's matches, then how many precede them in the row

bool holds(uint i, uint v) { return uint(clamp(tokens[i], 0, int(p.v) - 1)) == v; }

void main() {
  const uint v = gl_WorkGroupID.x, lane = gl_LocalInvocationIndex, n = p.b * p.t;
  if (lane == 0) total = 0;
  barrier();
  if (PHASE == 0) {
    uint mine = 0;
    for (uint i = lane; i < n; i += WG) mine += holds(i, v) ? 1 : 0;
    atomicAdd(total, mine);
    barrier();
    if (lane == 0) lists[v] = total;
    return;
  }
  uint earlier = 0;
  for (uint u = lane; u < v; u += WG) earlier += lists[u];
  atomicAdd(total, earlier);
  const uint chunk = (n + WG - 1) / WG, first = min(n, lane * chunk), end = min(n, first + chunk);
  uint mine = 0;
  for (uint i = first; i < end; ++i) mine += holds(i, v) ? 1 : 0;
  before[lane] = mine;
  barrier();
  if (lane == 0) {
    uint run = 0;
    for (uint l = 0; l < WG; ++l) {
      const uint m = before[l];
      before[l] = run;
      run += m;
    }
    lists[p.v + v] = total;
  }
  barrier();
  uint at = 2 * p.v + total + before[lane];
  for (uint i = first; i < end; ++i)
    if (holds(i, v)) lists[at++] = i;
}
