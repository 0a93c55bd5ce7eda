#version 450
// dlogits = (softmax(logits) - onehot(target)) / total_rows, WRITTEN (not accumulated):
// the loss starts the backward pass, so there is nothing to add to.
// logits, dlogits: (N, V)  targets: (N) int32  rows: (N, 2) from cross_entropy_forward
// Rows on y (walked in steps of the grid past 65535), a row's logits on x, four at a time
// with VEC4 (V % 4 == 0, the views 16-byte aligned): a row's statistics and target are
// loaded once per invocation and row, and no index needs a division.
#extension GL_GOOGLE_include_directive : require
#include "loss.h"

layout(local_size_x = BRIGADE_WG_LOSS_ROW) in;
layout(constant_id = 0) const bool VEC4 = false;
layout(binding = 0) readonly buffer Logits { float logits[]; };
layout(binding = 0) readonly buffer Logits4 { vec4 logits4[]; };
layout(binding = 1) readonly buffer Targets { int targets[]; };
layout(binding = 2) readonly buffer Rows { float rows[]; };
layout(binding = 3) writeonly buffer DLogits { float dlogits[]; };
layout(binding = 3) writeonly buffer DLogits4 { vec4 dlogits4[]; };
layout(push_constant) uniform Push { CrossEntropyPush p; };

void main() {
  const float inv_total = 1.0 / float(p.total_rows);
  const uint per_row = VEC4 ? p.vocab / 4 : p.vocab, step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint row = gl_WorkGroupID.y; row < p.rows; row += gl_NumWorkGroups.y) {
    const float top = rows[2u * row], lse = rows[2u * row + 1u];
    const int target = targets[row];
    for (uint q = gl_GlobalInvocationID.x; q < per_row; q += step) {
      const uint i = row * per_row + q;
      if (VEC4) {
        const vec4 prob = exp((logits4[i] - top) - lse);
        const vec4 hit = vec4(equal(ivec4(4 * q) + ivec4(0, 1, 2, 3), ivec4(target)));
        dlogits4[i] = (prob - hit) * inv_total;
      } else {
        const float prob = exp((logits[i] - top) - lse);
        dlogits[i] = (prob - (target == int(q) ? 1.0 : 0.0)) * inv_total;
      }
    }
  }
}
