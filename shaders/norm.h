// LayerNorm and BatchNorm2d: push constants and the BatchNorm statistics accumulator, shared
// by the GLSL kernels and their C++ launchers. Plain 32-bit scalars only, so std430 and C++
// layouts agree. The workgroup width of the reducing kernels is in workgroup_reduce.h.
#ifndef BRIGADE_SHADERS_NORM_H
#define BRIGADE_SHADERS_NORM_H

#ifdef __cplusplus
#include <cstdint>
namespace brigade::shaders {
using uint = std::uint32_t;
#endif

// Threads per workgroup of the per-column and per-element norm kernels.
#define BRIGADE_WG_NORM 256

// LayerNorm over the last dimension: `rows` rows of `channels` values.
struct LayerNormPush {
  uint rows;
  uint channels;
  float eps;
};

// BatchNorm2d over NCHW: batch = N, channels = C, spatial = H*W. `accumulate` (0 or 1):
// whether a training forward merges its batch statistics into the mini-batch accumulator
// (0 when re-materialization recomputes a forward that was already counted).
struct BatchNormPush {
  uint batch;
  uint channels;
  uint spatial;
  float eps;
  uint accumulate;
};

// The running-statistics update, once per mini-batch.
struct BatchNormUpdatePush {
  uint channels;
  float momentum;
};

// One channel's statistics over the micro-batches of a mini-batch so far: element count,
// mean and M2 (sum of squared deviations from the mean). Micro-batches merge with Chan et
// al.'s pairwise rule; raw sums of squares would cancel catastrophically in fp32 when
// |mean| >> std. Zero-filled memory is the empty accumulator.
struct BatchNormStats {
  uint count;
  float mean;
  float m2;
};

#ifdef __cplusplus
static_assert(sizeof(BatchNormStats) == 12, "std430 array stride of BatchNormStats");
}  // namespace brigade::shaders
#endif
#endif
