// The core of nanoGPT's CausalSelfAttention, between c_attn (which produces qkv) and c_proj
// (which consumes y): split qkv into q, k, v, view them as NH heads of HS = C/NH channels,
// y = softmax(q k^T / sqrt(HS), causal) v per head, heads concatenated back into C channels.
// Launchers record dispatches into `cmd` and never submit.
//
// The products run on the batched matmul kernel (ops/matmul.h), over z = b*NH + h: on
// lavapipe it reaches several times the GFLOPS of a kernel walking one query row per
// invocation. The products read and write each head where it lies in qkv, y and dqkv (a grid
// of matrices, ops/matmul.h), the (T,T) scores of every head land in the scratch, and a
// row-softmax kernel applies the causal mask. The masked upper triangle is computed and
// multiplied by zeros: half of the products' FLOPs, still faster than the row kernels were.
//
// What forward saves for backward: lse (B,NH,T), the log-sum-exp of each row's scaled
// scores. Backward recomputes the scores from qkv and turns them into probabilities with
// exp(s - lse), so a layer keeps B*NH*T floats rather than the (B,NH,T,T) attention matrix
// (gpt-mini, one micro-batch of 8: 16 KiB instead of 2 MiB per layer); the matrix lives only
// in the scratch, which the layers of a stage share. Backward also reads y, which c_proj
// keeps as its input anyway.
//
// The row kernels (Form::Direct, SwiftShader's form while its matrix kernel was slow) compute
// the same passes straight from the token layouts, one query (or key) row per invocation; of the
// scratch they use only the backward's B*NH*T floats of delta. They never store the (T,T)
// matrix: the forward streams keys with an online softmax, the backward recomputes each
// probability from lse. Form::Fused runs them staged, flash attention on SIMT cores: a
// workgroup's 64 rows read the other side's rows (keys and values; queries and output
// gradients) from blocks they copy into shared memory together, with the same sums in the
// same order, so its results are the unstaged kernels' bits. On 16-bit qkv and y (which the row
// kernels do not take) Form::Fused is flash attention on matrix tiles (ops/attention_tiles.h)
// where the stage's type takes the device's matrix units, and the matrix form elsewhere.
// (BRIGADE_ATTENTION picks a device's form: ops/form.h.)
//
// Results are deterministic: every sum runs in a fixed order (the matmul's and one
// invocation's per softmax row).
//
// qkv (f.x) and y (f.y) may be kept in 16 bits (Formats), read and written by the matrix
// form's kernels themselves (the row kernels take fp32 only); y is then stored as the
// rounded fp32 result, and the gradients written stay fp32. With both in one 16-bit type
// every product reads 16-bit operands, as autocast's attention does (so all seven take a
// device's matrix units): P, dS and dy are packed, rounded, into the scratch for the products
// that read them (the softmax kernels read P, dS and dy in fp32; a caller that wants one value
// of dy throughout passes it rounded, as GptBlock does).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ops/form.h"
#include "ops/precision.h"
#include "vk/commands.h"

namespace brigade::ops {

// Floats of scratch with which the launchers work through `samples` samples per chunk (both
// passes; the backward needs more). Sub-regions start at multiples of 256 bytes from the
// scratch view's offset, which must itself be a valid storage offset.
// Per sample: 2 NH*T*T floats of scores (P and dS), in 16 bits (`stored`) NH*T*T more for
// their packed copies and T*C/2 for dy's, plus padding.
uint64_t attention_scratch_floats(uint32_t samples, uint32_t T, uint32_t C, uint32_t NH,
                                  Precision stored = Precision::Fp32);

// The matrix form's scratch for B samples within about `cap_bytes`: as many whole samples as
// fit, else as many heads of one sample as fit, one head at least (where one sample's T*T
// scores of every head are more than a kernel binds, the launchers work through its heads).
uint64_t attention_scratch_within(uint32_t B, uint32_t T, uint32_t C, uint32_t NH, Precision stored,
                                  uint64_t cap_bytes);

// Whether attention with qkv and y stored in `stored` and heads of HS takes flash attention on
// matrix tiles on the device by default: no (T,T) scores, B*NH*T floats of scratch for the
// backward's delta (qkv and dy starting on 16 bytes, as a GPT block's do).
bool attention_takes_tiles(const vk::PhysicalInfo& device, Precision stored, uint32_t HS);

// Which kernels attention takes on the device with qkv and y stored in `stored` (16 bits in
// the GPT blocks of a 16-bit stage where they store them, fp32 otherwise), in words (`plan`).
std::string attention_path(const vk::PhysicalInfo& device, Precision stored);

// qkv (B,T,3C) -> y (B,T,C), lse (B,NH,T); y and lse are overwritten. In the matrix form
// `scratch` holds at least one head's scores (attention_scratch_within); with less than a whole
// batch's worth the samples, or one sample's heads, are done in chunks that fit.
void attention_forward(vk::Commands& cmd, vk::View qkv, vk::View y, vk::View lse,
                       vk::View scratch, uint32_t B, uint32_t T, uint32_t C, uint32_t NH,
                       std::optional<Form> form = {}, Formats f = {});

// Packed copies around a 16-bit backward (f.x, rounded, laid out as their tensors), so that
// no pass of its own packs them: dy's, written by the caller's product that computed dy (the
// matrix form's products read it instead of packing dy themselves), and dqkv's as the backward
// leaves dqkv, for the caller's products (written by the matrix form's products as they store
// dqkv, packed at the end by the other forms).
struct PackedGradients {
  std::optional<vk::View> dy, dqkv;
};

// Walks the forward in reverse: dqkv (B,T,3C) = the gradient of the loss with respect to
// qkv (each element written once, by one kernel; what dqkv held is not read), given the
// forward's qkv (B,T,3C), y (B,T,C), lse (B,NH,T) and the output gradient dy (B,T,C).
// `scratch` as for attention_forward.
void attention_backward(vk::Commands& cmd, vk::View qkv, vk::View y, vk::View lse, vk::View dy,
                        vk::View dqkv, vk::View scratch, uint32_t B, uint32_t T, uint32_t C,
                        uint32_t NH, std::optional<Form> form = {}, Formats f = {}, PackedGradients copies = {});

}  // namespace brigade::ops
