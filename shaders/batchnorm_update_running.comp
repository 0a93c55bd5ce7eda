#version 450
// Once per mini-batch: the running statistics take one momentum step towards the whole
// mini-batch's mean and UNBIASED variance (what PyTorch does for the full mini-batch at
// once), then the accumulator is cleared for the next mini-batch. A channel with fewer
// than two values accumulated is left unchanged.
//   running = (1 - momentum) * running + momentum * batch
// stats: (C) BatchNormStats  running_mean, running_var: (C)
#extension GL_GOOGLE_include_directive : require
#include "norm.h"

layout(local_size_x = BRIGADE_WG_NORM) in;
layout(binding = 0) buffer Stats { BatchNormStats stats[]; };
layout(binding = 1) buffer RunningMean { float running_mean[]; };
layout(binding = 2) buffer RunningVar { float running_var[]; };
layout(push_constant) uniform Push { BatchNormUpdatePush p; };

void main() {
  const uint c = gl_GlobalInvocationID.x;
  if (c >= p.channels) return;
  const BatchNormStats s = stats[c];
  if (s.count > 1u) {
    const float unbiased = s.m2 / float(s.count - 1u);
    running_mean[c] = p.momentum * s.mean + (1.0 - p.momentum) * running_mean[c];
    running_var[c] = p.momentum * unbiased + (1.0 - p.momentum) * running_var[c];
  }
  stats[c] = BatchNormStats(0u, 0.0, 0.0);
}
