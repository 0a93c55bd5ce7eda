// Sums down the columns of a (rows, columns) tensor, for the kernels that reduce a gradient
// over its rows (linear_bias_backward, layernorm_backward_weight). A workgroup takes COLUMNS
// columns (or quads of columns) and LANES invocations down each: lane l sums rows l,
// l + LANES, ... in order, then lane 0 adds the lanes' sums in order, so a column's sum
// depends on LANES alone, never on timing (no atomics). CPU devices take one lane and small
// workgroups: there each workgroup runs on one thread, and a few hundred columns still make
// several. GPUs take 64 lanes, so a column of 16k rows is 64 short walks, not one long one.
// Shared by GLSL and the C++ launchers (ops/launch_geometry.h: column_lanes).
#ifndef BRIGADE_SHADERS_COLUMN_SUMS_H
#define BRIGADE_SHADERS_COLUMN_SUMS_H

#define BRIGADE_COLUMNS_CPU 8
#define BRIGADE_COLUMNS_GPU 4
#define BRIGADE_LANES_GPU 64

#ifndef __cplusplus
// Specialization constants 1 and 2; the workgroup is (COLUMNS, LANES).
layout(local_size_x_id = 2, local_size_y_id = 1) in;
layout(constant_id = 1) const uint LANES = 1;
layout(constant_id = 2) const uint COLUMNS = BRIGADE_COLUMNS_CPU;
shared vec4 lane_sums[LANES * COLUMNS];

// The column this invocation sums (it may lie past the last one) and its first row.
uint sum_column() { return gl_WorkGroupID.x * COLUMNS + gl_LocalInvocationID.x; }
uint first_row() { return gl_LocalInvocationID.y; }

// The column's total from every lane's sum, in lane 0 (other lanes get their own back).
// Every invocation of the workgroup must call it, the same number of times.
vec4 column_total(vec4 sum) {
  if (LANES == 1) return sum;
  const uint x = gl_LocalInvocationID.x, lane = gl_LocalInvocationID.y;
  barrier();  // an earlier call's reads are done
  lane_sums[lane * COLUMNS + x] = sum;
  barrier();
  if (lane == 0)
    for (uint l = 1; l < LANES; ++l) sum += lane_sums[l * COLUMNS + x];
  return sum;
}
#endif

#endif
