// A product's K split into parts (split-K). A weight gradient sums over every token of a
// micro-batch: gpt2-small's are 768 x 768 to 3072 x 768 over K = 16,384, 36 to 144 blocks of
// 128 x 128, too few to keep a GPU's compute units busy, each block walking K alone. Split, the
// staged kernels (shared and matrix tiles) sum each part of K in a workgroup of its own into
// the recording's workspace (vk::Commands::workspace), and one pass then adds the parts to C
// in order. Deterministic: the same shape on the same device gives the same bits, though not
// the bits of the product unsplit (its sum runs in another order).
#pragma once

#include <cstdint>

#include "ops/matmul.h"

namespace brigade::ops {

// Bytes of workspace a stage keeps for the parts on the device: 32 MiB where products split by
// default (GPUs), none on CPUs (whose few cores a product's blocks fill; a split only adds a
// pass) or with BRIGADE_SPLIT_K=off (auto, the default, splits).
uint64_t matmul_workspace_bytes(const vk::PhysicalInfo& device);

// Whether a product can be split: one product (batch, terms and heads 1), no epilogue, causal
// shape or rounding, an fp32 C of packed rows from its view's start (a weight gradient),
// accumulating or not. ops::matmul checks the bias and C's copy (neither may come).
bool splits_k(const MatmulParams& p);

// The tiling ops::matmul takes by default for a product whose default tiling is `t`: where it
// splits, the device's largest block of t's kind with K in as many parts (a power of two up to
// 16) as bring the blocks to 256, each part at least 1,024 deep, all of them within
// `workspace_bytes`; `t` itself where it does not (one part, a product that cannot split, or
// register blocks). On matrix units, where it would split and the largest blocks half as wide
// are 256 or more, those, whole.
MatmulTiling split_tiling(const vk::PhysicalInfo& device, const MatmulTiling& t, const MatmulParams& p,
                          uint64_t workspace_bytes);

// Records C (+)= alpha op(A) op(B) on `t` with t.k_parts > 1: each part's sum into
// cmd.workspace(), then their sum added to C in order (C zeroed first unless it accumulates).
// ops::matmul's tail for a split product, its views checked.
void matmul_split(vk::Commands& cmd, vk::View a, vk::View b, vk::View c, const MatmulParams& p,
                  const MatmulTiling& t);

}  // namespace brigade::ops
