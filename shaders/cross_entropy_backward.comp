#version 450
// dlogits = (softmax(logits) - onehot(target)) / total_rows, WRITTEN (not accumulated):
// the loss starts the backward pass, so there is nothing to add to.
// logits, dlogits: (N, V)  targets: (N) int32  rows: (N, 2) from cross_entropy_forward
#extension GL_GOOGLE_include_directive : require
#include "loss.h"

layout(local_size_x = BRIGADE_WG_LOSS) in;
layout(binding = 0) readonly buffer Logits { float logits[]; };
layout(binding = 1) readonly buffer Targets { int targets[]; };
layout(binding = 2) readonly buffer Rows { float rows[]; };
layout(binding = 3) writeonly buffer DLogits { float dlogits[]; };
layout(push_constant) uniform Push { CrossEntropyPush p; };

void main() {
  const uint n = p.rows * p.vocab;
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  const float inv_total = 1.0 / float(p.total_rows);
  for (uint i = gl_GlobalInvocationID.x; i < n; i += stride) {
    const uint row = i / p.vocab, v = i % p.vocab;
    const float prob = exp((logits[i] - rows[2u * row]) - rows[2u * row + 1u]);
    const float target = targets[row] == int(v) ? 1.0 : 0.0;
    dlogits[i] = (prob - target) * inv_total;
  }
}
