// Token + learned position embedding (nanoGPT's transformer.wte + transformer.wpe): launchers
// that record the kernels of shaders/embedding_*.comp into a vk::Commands.
//   tokens (B, T) int32  wte (V, C)  wpe (block_size, C)  out (B, T, C)
// Token ids are the data loader's to check: a token outside [0, V) is clamped into it by the
// kernels (so it acts as id 0 or V - 1, in forward and backward alike) and never reads or
// writes out of bounds. The backward pass accumulates (dwte +=, dwpe +=), so the tied lm_head
// gradient and all micro-batches add into the same buffers.
#pragma once

#include <cstdint>
#include <optional>

#include "shaders/conv.h"
#include "vk/commands.h"

namespace brigade::ops {

// out = wte[tokens] + wpe[0 .. T). Throws UserError if wpe has fewer than T rows.
void embedding_forward(vk::Commands& cmd, vk::View tokens, vk::View wte, vk::View wpe,
                       vk::View out, uint32_t B, uint32_t T, uint32_t C, uint32_t V);

// How the token gradient finds each vocabulary row's positions:
//   Scan: each group of `rows` vocabulary rows, column by column, scans all B*T tokens (a CPU
//     device's way: one group covers the byte vocabulary);
//   Lists: each row's positions are first listed in order in the scratch (two passes, a
//     workgroup a row), then each (row, column) sums its own (a GPU's way);
//   Auto: Lists on GPUs where a scratch is given and V <= 65535, Scan otherwise.
enum class TokenPass { Auto, Scan, Lists };

// Floats (as uints) of the scratch the Lists pass takes: counts and starts of the V rows, and
// the B*T positions.
uint64_t embedding_scratch_floats(uint32_t B, uint32_t T, uint32_t V);

// dwte[v] += sum of dout over the positions holding token v; dwpe[t] += sum over b of
// dout[b, t]. Both sum in a fixed order, each row's positions in increasing order: the same
// inputs give bit-identical gradients, whichever token pass, and with any `rows` (vocabulary
// rows an invocation of the scan owns; 0: the device's choice).
void embedding_backward(vk::Commands& cmd, vk::View dout, vk::View tokens, vk::View dwte,
                        vk::View dwpe, uint32_t B, uint32_t T, uint32_t C, uint32_t V,
                        std::optional<vk::View> scratch = std::nullopt, TokenPass pass = TokenPass::Auto,
                        uint32_t rows = 0);

}  // namespace brigade::ops
