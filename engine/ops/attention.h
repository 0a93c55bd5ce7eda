// The core of nanoGPT's CausalSelfAttention, between c_attn (which produces qkv) and c_proj
// (which consumes y): split qkv into q, k, v, view them as NH heads of HS = C/NH channels,
// y = softmax(q k^T / sqrt(HS), causal) v per head, heads concatenated back into C channels.
// Launchers record dispatches into `cmd` and never submit.
//
// What forward saves for backward: lse (B,NH,T), the log-sum-exp of each row's scaled
// scores. Backward recomputes the scores from qkv and turns them into probabilities with
// exp(s - lse), so a layer keeps B*NH*T floats rather than the (B,NH,T,T) attention matrix
// (gpt-mini, one micro-batch of 8: 16 KiB instead of 2 MiB per layer; GPT-2 small at T=1024:
// 48 KiB instead of 48 MiB per sample). Backward also reads y, which c_proj keeps as its
// input anyway.
#pragma once

#include <cstdint>

#include "vk/commands.h"

namespace brigade::ops {

// qkv (B,T,3C) -> y (B,T,C), lse (B,NH,T); y and lse are overwritten.
void attention_forward(vk::Commands& cmd, vk::View qkv, vk::View y, vk::View lse, uint32_t B,
                       uint32_t T, uint32_t C, uint32_t NH);

// Walks the forward in reverse: dqkv (B,T,3C) += the gradient of the loss with respect to
// qkv, given the forward's qkv (B,T,3C), y (B,T,C), lse (B,NH,T) and the output gradient
// dy (B,T,C). delta (B,NH,T) is scratch (overwritten with dy.y per row).
void attention_backward(vk::Commands& cmd, vk::View qkv, vk::View y, vk::View lse, vk::View dy,
                        vk::View dqkv, vk::View delta, uint32_t B, uint32_t T, uint32_t C,
                        uint32_t NH);

}  // namespace brigade::ops
