#version 450
// LayerNorm parameter gradients, one invocation per channel summing down the rows in order
// (deterministic, no atomics):  dweight += sum_N dy * xhat,  dbias += sum_N dy.
// dy, x: (N, C)  mean, rstd: (N) from the forward  dweight, dbias: (C)
#extension GL_GOOGLE_include_directive : require
#include "norm.h"

layout(local_size_x = BRIGADE_WG_NORM) in;
layout(binding = 0) readonly buffer DY { float dy[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 2) readonly buffer Mean { float mean_in[]; };
layout(binding = 3) readonly buffer Rstd { float rstd_in[]; };
layout(binding = 4) buffer DWeight { float dweight[]; };
layout(binding = 5) buffer DBias { float dbias[]; };
layout(push_constant) uniform Push { LayerNormPush p; };

void main() {
  const uint C = p.channels;
  const uint c = gl_GlobalInvocationID.x;
  if (c >= C) return;
  float dw = 0.0, db = 0.0;
  for (uint row = 0u; row < p.rows; ++row) {
    const float g = dy[row * C + c];
    dw += g * (x[row * C + c] - mean_in[row]) * rstd_in[row];
    db += g;
  }
  dweight[c] += dw;
  dbias[c] += db;
}
