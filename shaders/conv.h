// Push constants and workgroup sizes of the Conv2d, MaxPool2d and embedding kernels, shared
// by the GLSL kernels and their C++ launchers (engine/ops/conv2d.h, maxpool2d.h and
// embedding.h). Plain 32-bit scalars only, so std430 and C++ layouts agree.
#ifndef BRIGADE_SHADERS_CONV_H
#define BRIGADE_SHADERS_CONV_H

#ifdef __cplusplus
#include <cstdint>
namespace brigade::shaders {
using uint = std::uint32_t;
#endif

// Invocations per workgroup of the pixel-parallel conv kernels (forward, backward-data).
#define BRIGADE_WG_CONV 64
// Invocations per workgroup that share one tile of the weight gradient and reduce their
// partial sums in shared memory (a fixed tree, so the result is deterministic). Power of two.
#define BRIGADE_WG_CONV_REDUCE 32
// Max-pooling workgroups: 8 x 8 invocations over (column, row) of one plane, one output
// window or input element each.
#define BRIGADE_WG_POOL_X 8
#define BRIGADE_WG_POOL_Y 8

// Each conv kernel computes a register tile of outputs per invocation (specialization
// constants 0 and 1, chosen per device by the launcher: ops::Conv2dTiles), so one load feeds
// several FMAs without shared memory, which lavapipe runs slowly (its barriers switch
// between invocations):
//   forward:         OCB output channels x PX output pixels of one row
//   backward-data:   ICB input channels x PX input pixels of one row (one stride phase)
//   backward-weight: OCB output channels x KB flattened (ic, kh, kw) taps

// Conv2d over NCHW: x (n, ic, h, w), weight (oc, ic, kh, kw), y (n, oc, oh, ow) with
// oh = (h + 2 pad_h - kh) / stride_h + 1 and likewise ow. Zero padding, dilation 1, groups 1.
struct Conv2dPush {
  uint n, ic, h, w;
  uint oc, kh, kw;
  uint oh, ow;
  uint stride_h, stride_w, pad_h, pad_w;
};

// The columns kernels (conv2d_im2col, conv2d_col2im) work on samples first .. first + count - 1
// of the convolution `conv`; the columns buffer holds those samples only.
struct Conv2dColumnsPush {
  Conv2dPush conv;
  uint first, count;
};

// The Winograd kernels (conv2d_winograd_*.comp, ops/conv2d_winograd.h) work on samples
// first .. first + count - 1 of tensors with `channels` planes; the weight transforms on a
// (rows, channels, 3, 3) weight.
struct WinogradPush {
  uint channels, rows;
  uint first, count;
};

// MaxPool2d over (N * C planes, h, w) with a K x K window, stride S (specialization
// constants 0 and 1), no padding; oh = (h - K) / S + 1 (floored, as PyTorch).
struct MaxPool2dPush {
  uint h, w;
  uint oh, ow;
  uint planes;  // N x C
};

// Embedding: invocations per workgroup, one channel each (forward, token gradient) or one
// element each (position gradient), and the positions one forward workgroup covers.
#define BRIGADE_WG_EMBEDDING 64
#define BRIGADE_WG_EMBEDDING_TOKENS 64
#define BRIGADE_WG_EMBEDDING_LISTS 128
#define BRIGADE_EMBEDDING_POSITIONS 16

// Token + position embedding: tokens (b, t) int32, wte (v, c), wpe (at least t rows, c),
// out (b, t, c).
struct EmbeddingPush {
  uint b, t, c, v;
};

#ifdef __cplusplus
}  // namespace brigade::shaders
#endif
#endif
