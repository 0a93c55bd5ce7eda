#version 450
// Softmax statistics per row, one workgroup per row: the row maximum and
// log(sum exp(logit - max)). Kept apart (not summed into one log-sum-exp) so that the loss
// and the gradient subtract the maximum from each logit exactly; with logits near 1e4 a
// single fp32 log-sum-exp would carry an absolute error of ~1e-3.
// logits: (N, V)  rows: (N, 2) = (max, log-sum)
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "loss.h"
#include "workgroup_reduce.h"

layout(local_size_x_id = 0) in;
layout(binding = 0) readonly buffer Logits { float logits[]; };
layout(binding = 1) writeonly buffer Rows { float rows[]; };
layout(push_constant) uniform Push { CrossEntropyPush p; };

void main() {
  const uint V = p.vocab, lane = gl_LocalInvocationID.x, width = gl_WorkGroupSize.x;
  for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) {
    const uint base = row * V;
    float top = uintBitsToFloat(0xFF800000u);  // -inf
    for (uint v = lane; v < V; v += width) top = max(top, logits[base + v]);
    top = workgroup_max(top);
    float sum = 0.0;
    for (uint v = lane; v < V; v += width) sum += exp(logits[base + v] - top);
    sum = workgroup_sum(sum);
    if (lane == 0u) {
      rows[2u * row] = top;
      rows[2u * row + 1u] = log(sum);
    }
  }
}
