// A lane's walk over one channel's N * HW values of an (N, C, HW) tensor, as BatchNorm2d's
// training kernels walk them, GROUP consecutive values of a plane at a time (1, 2 or 4, a
// divisor of HW, so a group never leaves its plane): the lane's j-th group starts at value
// k = GROUP * (lane + j * width) of the channel (k = n * HW + s: image n, position s), at
// offset (n * C + c) * HW + s of the tensor. The walk keeps (n, s) and steps them, rather than
// dividing k by HW at every group: an integer division by a value known only at run time is
// a loop of scalar divisions on a CPU device's vector lanes.
// A group is held in a vec4, its values first; kGroupValues masks the rest. Summed in a vec4
// and the lanes' totals taken with lanes_total (shaders/workgroup_reduce.h), a walk of single
// values (GROUP 1) sums in the order a float would.
// x_group reads a group of x, and with BRIGADE_GROUP_Y y_group writes one of y (the kernel's
// views of them: x, x4, xw, xw2 and FORMAT_X; y, y4, yw, yw2 and FORMAT_Y).
// Needs p.batch, p.channels and p.spatial (BatchNormPush) and GROUP before it.
#ifndef BRIGADE_SHADERS_CHANNEL_WALK_GLSL
#define BRIGADE_SHADERS_CHANNEL_WALK_GLSL

const vec4 kGroupValues = vec4(1.0, GROUP > 1 ? 1.0 : 0.0, GROUP > 2 ? 1.0 : 0.0, GROUP > 2 ? 1.0 : 0.0);

struct ChannelWalk {
  uint n, s;            // where the group starts: image and position
  uint step_n, step_s;  // a step, GROUP * width values: step_n * HW + step_s
};

// The walk of the lane'th of `width` lanes.
ChannelWalk walk_from(uint lane, uint width) {
  const uint first = GROUP * lane, step = GROUP * width;
  return ChannelWalk(first / p.spatial, first % p.spatial, step / p.spatial, step % p.spatial);
}
bool walk_inside(ChannelWalk w) { return w.n < p.batch; }
uint walk_offset(ChannelWalk w, uint c) { return (w.n * p.channels + c) * p.spatial + w.s; }
void walk_next(inout ChannelWalk w) {
  w.n += w.step_n;
  w.s += w.step_s;
  if (w.s >= p.spatial) {
    w.s -= p.spatial;
    ++w.n;
  }
}

// The GROUP values of x from element i (a multiple of GROUP), the rest zero.
vec4 x_group(uint i) {
  const bool fp32 = FORMAT_X == BRIGADE_FORMAT_FP32;
  if (GROUP == 4) return fp32 ? x4[i >> 2] : quad_in(xw2[i >> 2], FORMAT_X);
  if (GROUP == 2) return vec4(fp32 ? vec2(x[i], x[i + 1]) : pair_in(xw[i >> 1], FORMAT_X), 0.0, 0.0);
  return vec4(fp32 ? x[i] : half_in(xw[i >> 1], i, FORMAT_X), 0.0, 0.0, 0.0);
}

#ifdef BRIGADE_GROUP_Y
// The first GROUP values of v as y's elements from i.
void y_group(uint i, vec4 v) {
  const bool fp32 = FORMAT_Y == BRIGADE_FORMAT_FP32;
  if (GROUP == 4 && fp32) y4[i >> 2] = v;
  else if (GROUP == 4) yw2[i >> 2] = quad_out(v, FORMAT_Y);
  else if (GROUP == 2 && fp32) y[i] = v.x, y[i + 1] = v.y;
  else if (GROUP == 2) yw[i >> 1] = pair_out(v.x, v.y, FORMAT_Y);
  else y[i] = v.x;
}
#endif

#endif
