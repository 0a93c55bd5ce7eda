// Softmax cross-entropy: push constants shared by the GLSL kernels and their C++ launchers.
// Plain 32-bit scalars only, so std430 and C++ layouts agree. The workgroup width of the
// per-row kernels is in workgroup_reduce.h.
#ifndef BRIGADE_SHADERS_LOSS_H
#define BRIGADE_SHADERS_LOSS_H

#ifdef __cplusplus
#include <cstdint>
namespace brigade::shaders {
using uint = std::uint32_t;
#endif

// Threads per workgroup of the element-wise gradient kernel.
#define BRIGADE_WG_LOSS 256
// cross_entropy_backward: invocations along a row of logits (one row per workgroup row).
#define BRIGADE_WG_LOSS_ROW 64

// `rows` rows of `vocab` logits, out of `total_rows` rows in the whole mini-batch: the loss
// is a mean over the mini-batch, so each micro-batch divides by the mini-batch's count.
struct CrossEntropyPush {
  uint rows;
  uint vocab;
  uint total_rows;
};

#ifdef __cplusplus
}  // namespace brigade::shaders
#endif
#endif
