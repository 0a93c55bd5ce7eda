// A Conv2d followed by a ReLU and a 2x2 max pooling at stride 2, as one layer's fold (the
// builder's, model/layers.h): the layer's output is the pooled one, and it keeps per pooled
// output a code for where its gradient goes. Two ways:
// - the patch fold, where the convolution is small (the first layer of an image network: one
//   input channel, 3x3): shaders/conv2d_pool_forward.comp computes each pooled output
//   straight from the input patch under it, weights loaded once for all lanes, and the weight
//   gradient comes straight from the pooled gradient (shaders/conv2d_pool_weight.comp); the
//   convolution's output is never stored;
// - the tiles fold, for any other convolution: it runs in its device's form (conv2d_form, by
//   x's format), and the pooling works on tiles of its output, in Winograd's output transform
//   (the output never stored) or in a pass of its own (shaders/conv2d_pool_tiles.comp).
// Either backward spreads the pooled gradient back into the convolution's output gradient for
// the convolution's own passes (ops/conv2d.h) where they need it; in Winograd's form those
// passes read the pooled gradient through the codes instead (conv2d_pool_backward).
//   x (N, IC, H, W)  weight (OC, IC, KH, KW)  bias (OC)  ->  y (N, OC, OH / 2, OW / 2)
// with OH, OW the convolution's output (Conv2dShape::out_h, out_w), halves floored.
// The values and gradients are those of Conv2d, ReLU and MaxPool2d(2) on the same
// convolution outputs (PyTorch's rules: the first maximum, a NaN wins, no gradient through a
// maximum not positive); the patch fold's sums run in another order than the matrix form's,
// so they agree with it to fp32's rounding.
#pragma once

#include <cstdint>
#include <optional>

#include "ops/conv2d.h"
#include "ops/precision.h"
#include "vk/commands.h"

namespace brigade::ops {

// Whether the patch fold takes this convolution: even output sides, an even number of pooled
// outputs a row, whole words of codes (OC % 4 == 0), and weights and an input patch small
// enough to keep in registers (kPoolFoldWeights, kPoolFoldPatch). Every other convolution
// with an output of 2 x 2 at least takes the tiles fold (conv2d_pool_tiles_fit). Which fold
// a shape takes decides every function below.
constexpr uint32_t kPoolFoldWeights = 1024, kPoolFoldPatch = 96;
bool conv2d_pool_fits(const Conv2dShape& s);
bool conv2d_pool_tiles_fit(const Conv2dShape& s);

// The tiles fold's tile on `device` for an x stored as `x`: Winograd's where the device runs
// that form (conv2d_form), else 4. Tiles of TILE x TILE of the convolution's output hold
// whole 2x2 windows.
uint32_t conv2d_pool_tile(const vk::PhysicalInfo& device, const Conv2dShape& s, Precision x = Precision::Fp32);

// Words of codes per sample: the patch fold's byte per pair of pooled outputs and channel,
// or the tiles fold's word per tile and channel (four bits a window), for the smallest tile.
uint64_t conv2d_pool_code_words(const Conv2dShape& s);

// Floats of scratch either fold's passes need over `s.n` samples, the convolution's own
// passes working through `samples` at a time: the convolution's output (or its gradient)
// for every sample, with the tiles fold on a 16-bit y `stored` its fp32 pooled output, then
// the convolution's scratch (conv2d_pool_conv_scratch); with the patch fold, at least the
// weight gradient's partial sums.
uint64_t conv2d_pool_scratch_floats(const Conv2dShape& s, uint32_t samples, Precision stored = Precision::Fp32);
// The part of `scratch` the convolution's own passes take (past the pooled output's room where
// `stored` is 16-bit).
vk::View conv2d_pool_conv_scratch(const Conv2dShape& s, vk::View scratch, Precision stored = Precision::Fp32);

// y = maxpool2(relu(conv(x, weight) + bias)), and the codes. x and y may be kept in 16 bits
// (`f`), read and written by the kernels themselves; the tiles fold pools a 16-bit y in fp32
// into its scratch and packs it, the bits the patch fold stores.
void conv2d_pool_forward(vk::Commands& cmd, vk::View x, vk::View weight, std::optional<vk::View> bias,
                         vk::View y, vk::View codes, const Conv2dShape& s, vk::View scratch, Formats f = {});

// The convolution's output gradient (N, OC, OH, OW), written whole at the start of
// `scratch`: each pooled dy at the element its code names, 0 elsewhere (the codes of the
// forward on an x stored as `x`). Returns its view.
vk::View conv2d_pool_unpool(vk::Commands& cmd, vk::View dy, vk::View codes, const Conv2dShape& s, vk::View scratch,
                            Precision x = Precision::Fp32);

// The tiles fold's backward, from the pooled dy and the codes: dx += the input gradient (when
// given; from the weight), dweight and dbias += theirs (when given; from x, stored as f.x).
// In Winograd's form its passes read dy through the codes; in the others the gradient is
// spread back (conv2d_pool_unpool) for them.
void conv2d_pool_backward(vk::Commands& cmd, vk::View dy, vk::View codes, vk::View x, vk::View weight,
                          std::optional<vk::View> dx, std::optional<vk::View> dweight, std::optional<vk::View> dbias,
                          const Conv2dShape& s, vk::View scratch, Formats f = {});

// The patch fold's weight gradient: dweight += dloss/dweight and, when given, dbias +=
// dloss/dbias, from the pooled dy and the codes, with x read as `x_format` stores it; the
// partial sums go down their columns in a fixed order, so the same inputs give the same bits.
void conv2d_pool_backward_weight(vk::Commands& cmd, vk::View dy, vk::View codes, vk::View x, vk::View dweight,
                                 std::optional<vk::View> dbias, const Conv2dShape& s, vk::View scratch,
                                 Precision x_format = Precision::Fp32);

}  // namespace brigade::ops
