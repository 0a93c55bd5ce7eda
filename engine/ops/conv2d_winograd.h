// Conv2d's 3x3, stride-1 passes by Winograd's F(m x m, 3x3), m = 2 or 4
// (shaders/winograd.glsl): each pass transforms its operands into (m + 2)^2 points per m x m
// tile, multiplies them as (m + 2)^2 matrix products on the matrix kernel (ops/matmul.h), and
// transforms back: 16 multiplies per 2x2 tile and channel pair, or 36 per 4x4, where the
// columns form (ops/conv2d.h) takes 36 or 144.
//   forward          M[p] (OC, tiles) = U[p] (OC, IC) . V[p] (IC, tiles), then y = A^T M A
//   backward-data    the forward's transpose: dV[p] (IC, tiles) = U[p]^T . dM[p] (OC, tiles)
//                    with dM = A dy A^T, then each tile's B dV B^T added into its patch of dx
//   backward-weight  dU[p] (OC, IC) = sum of dM[p] (OC, tiles) . V[p] (IC, tiles)^T, then
//                    dweight += G^T dU G
// U = G g G^T (the filters), V = B^T d B (input patches of (m + 2)^2 at stride m). The
// samples are worked through in chunks of as many as the scratch holds (scratch_floats).
// Rounding differs from the columns form (the transforms add and scale; F(4x4)'s
// coefficients reach 8, so its error is several times F(2x2)'s), deterministically: the same
// inputs give the same bits.
#pragma once

#include <cstdint>
#include <optional>

#include "ops/conv2d.h"

namespace brigade::ops::winograd {

// Whether the shape is one the passes take: a 3x3 kernel at stride 1 with padding at most 2.
bool fits(const Conv2dShape& s);

// Whether it also pays: at least 16 input channels. Its transforms pass over 16 values per
// tile for every input and output channel, the columns over 36 per tile for every input
// channel, so with few input channels the saved products do not pay for the transforms. On
// lavapipe, a 3x3 convolution's forward and weight gradient over 64 samples took 1.2x to 1.7x
// less time for 16 to 32 input channels, and 1.4x to 4x more for 1 to 8 (docs/BENCHMARKS.md).
bool pays(const Conv2dShape& s);

// Whether the forward stores a 16-bit y for this shape: two outputs of a row are one word
// only where the planes' width is even.
bool stores_half(const Conv2dShape& s);

// The output tile the passes take for this shape: m of F(m x m, 3x3), 2 or 4, whichever
// takes fewer products over the planes (4 for 7 x 7 and larger; on lavapipe F(4x4) took 1.05x
// to 1.5x less time than F(2x2) for 14 x 14 to 28 x 28 planes, docs/BENCHMARKS.md). Every
// function below takes the tile as `tile`, 0 meaning tile_for(s).
uint32_t tile_for(const Conv2dShape& s);

// Floats of scratch each sample adds (the transformed operands of the largest pass).
uint64_t floats_per_sample(const Conv2dShape& s, uint32_t tile = 0);

// Floats of scratch for `samples` samples at a time: the transformed operands of the
// largest pass and the transformed filters.
uint64_t scratch_floats(const Conv2dShape& s, uint32_t samples, uint32_t tile = 0);

// The three passes, for a shape that fits; views are checked by the caller. x and y may be
// 16-bit (y with an even width, so that each row of a tile is one word); dx is rounded to
// `dx_round`.
// With `codes`, the forward also takes the ReLU and 2x2 pooling after it (ops/conv2d_pool.h):
// y is the pooled output (fp32), codes one word per tile and channel.
void forward(vk::Commands& cmd, vk::View x, vk::View weight, std::optional<vk::View> bias,
             vk::View y, const Conv2dShape& s, vk::View scratch, Formats f, uint32_t tile = 0,
             std::optional<vk::View> codes = std::nullopt);
// The backward, either gradient or both: dx += the input gradient (from the weight, rounded
// to x_format, x's precision), dweight += the weight gradient (from x, read as x_format
// stores it). Both take the forward's transpose on dM = A dy A^T per tile, computed once for
// the two.
// With `codes`, dy is the gradient of the ReLU and 2x2 pooling the forward's output
// transform took (its `codes`), read through them.
struct Gradients {
  std::optional<vk::View> dx, weight;
  std::optional<vk::View> dweight, x;
  std::optional<vk::View> codes = {};
};
void backward(vk::Commands& cmd, vk::View dy, const Gradients& g, const Conv2dShape& s, vk::View scratch,
              Precision x_format, uint32_t tile = 0);

}  // namespace brigade::ops::winograd
