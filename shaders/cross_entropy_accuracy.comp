#version 450
// Evaluation: correct += the number of rows whose argmax (the first maximum, as
// torch.argmax: a NaN above every number, the first NaN where there are several) equals the
// target. One workgroup per row; integer atomics, exact in any
// order.
// logits: (N, V)  targets: (N) int32  correct: (1) uint32
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "loss.h"
#include "workgroup_reduce.h"

layout(local_size_x_id = 0) in;
layout(binding = 0) readonly buffer Logits { float logits[]; };
layout(binding = 1) readonly buffer Targets { int targets[]; };
layout(binding = 2) buffer Correct { uint correct[]; };
layout(push_constant) uniform Push { CrossEntropyPush p; };

void main() {
  const uint V = p.vocab, lane = gl_LocalInvocationID.x, width = gl_WorkGroupSize.x;
  uint hits = 0u;
  for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) {
    const uint base = row * V;
    uint top = 0u, index = 0xFFFFFFFFu;
    for (uint v = lane; v < V; v += width) {
      const uint key = argmax_key(logits[base + v]);
      if (key > top) {  // strict: a lane sees its indices in increasing order
        top = key;
        index = v;
      }
    }
    const uint best = workgroup_argmax(top, index);
    if (lane == 0u && int(best) == targets[row]) ++hits;
  }
  if (lane == 0u && hits > 0u) atomicAdd(correct[0], hits);
}
