// Sums down the columns of a (rows, columns) tensor, for the kernels that reduce a gradient
// over its rows (linear_bias_backward, layernorm_backward_weight). A workgroup takes COLUMNS
// columns (or quads of columns) and LANES invocations down each: lane l sums rows l,
// l + LANES, ... in order, then lane 0 adds the lanes' sums in order, so a column's sum
// depends on LANES alone, never on timing (no atomics). CPU devices take one lane and small
// workgroups: there each workgroup runs on one thread, and a few hundred columns still make
// several. GPUs take 64 lanes, so a column of 16k rows is 64 short walks, not one long one.
// The grid's second dimension cuts the rows into runs (ops/column_sums.h: one unless the
// launcher chooses more): with several, each run's workgroups write its own row of partial
// sums where the gradient would be added to, and a second pass adds the rows in order. The
// grid's first dimension is capped (ops/column_sums.h) and workgroups walk the columns past it.
// Shared by GLSL and the C++ launchers (ops/column_sums.h).
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

// The columns this invocation sums: the first (it may lie past the last one), then one
// stride of the grid on while the workgroup's first column is below `items` (a condition
// uniform across the workgroup, as column_total()'s barriers need). The launcher caps the
// grid at 65535 workgroups, so a tensor of more columns than the grid takes makes passes.
//   for (uint c = sum_column(); more_columns(c, items); c += column_stride()) { ... }
uint sum_column() { return gl_WorkGroupID.x * COLUMNS + gl_LocalInvocationID.x; }
uint column_stride() { return gl_NumWorkGroups.x * COLUMNS; }
bool more_columns(uint column, uint items) { return column - gl_LocalInvocationID.x < items; }
// The rows of an invocation's run, from its first to one past the run's last, of `rows` in all.
uint run_rows(uint rows) { return (rows + gl_NumWorkGroups.y - 1) / gl_NumWorkGroups.y; }
uint first_row(uint rows) { return gl_WorkGroupID.y * run_rows(rows) + gl_LocalInvocationID.y; }
uint end_row(uint rows) { return min(rows, (gl_WorkGroupID.y + 1) * run_rows(rows)); }
// A column's total into `sums` (a gradient's buffer array, of `items` columns): added to the
// gradient in one run, written to the run's row of partial sums in several.
bool in_runs() { return gl_NumWorkGroups.y > 1; }
#define STORE_TOTAL(sums, column, items, total)                        \
  {                                                                    \
    const uint at_ = gl_WorkGroupID.y * (items) + (column);            \
    sums[at_] = in_runs() ? (total) : sums[at_] + (total);             \
  }

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
