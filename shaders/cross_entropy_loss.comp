#version 450
// loss += sum over the rows of -log softmax(logits)[target] / total_rows, summed by one
// workgroup in a fixed order (deterministic; no float atomics). A target outside [0, V)
// makes the loss NaN: a kernel cannot raise, so the error shows in the loss.
// logits: (N, V)  targets: (N) int32  rows: (N, 2) from cross_entropy_forward  loss: (1)
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "loss.h"
#include "workgroup_reduce.h"

layout(local_size_x_id = 0) in;
layout(binding = 0) readonly buffer Logits { float logits[]; };
layout(binding = 1) readonly buffer Targets { int targets[]; };
layout(binding = 2) readonly buffer Rows { float rows[]; };
layout(binding = 3) buffer Loss { float loss[]; };
layout(push_constant) uniform Push { CrossEntropyPush p; };

void main() {
  const uint lane = gl_LocalInvocationID.x, width = gl_WorkGroupSize.x;
  float sum = 0.0;
  for (uint row = lane; row < p.rows; row += width) {
    const int t = targets[row];
    if (t < 0 || uint(t) >= p.vocab) {
      sum += uintBitsToFloat(0x7FC00000u);  // NaN
    } else {
      // -log p_t = (max - logit_t) + log sum exp(logit - max)
      sum += (rows[2u * row] - logits[row * p.vocab + uint(t)]) + rows[2u * row + 1u];
    }
  }
  sum = workgroup_sum(sum);
  if (lane == 0u) loss[0] += sum / float(p.total_rows);
}
