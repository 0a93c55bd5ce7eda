// Softmax cross-entropy over V classes with int32 targets, as
// torch.nn.functional.cross_entropy(reduction='mean') over the WHOLE mini-batch: a
// micro-batch of N rows out of N_total adds sum(-log softmax[target]) / N_total to the
// loss, so the M micro-batches of a step add up to the mini-batch mean. Numerically stable
// (the row maximum is subtracted before exp). A target outside [0, V) makes the loss NaN;
// there is no ignore_index.
#pragma once

#include <cstdint>

#include "vk/commands.h"

namespace brigade::ops {

// loss += sum_rows -log softmax(logits)[target] / N_total; `rows` keeps each row's max and
// log-sum-exp about it for the backward pass.
// logits: (N, V)  targets: (N) int32  rows: (N, 2) scratch  loss: (1)
void cross_entropy_forward(vk::Commands& cmd, vk::View logits, vk::View targets, vk::View rows,
                           vk::View loss, uint32_t N, uint32_t V, uint32_t N_total);
// dlogits = (softmax(logits) - onehot(target)) / N_total. WRITTEN, not accumulated: the
// loss is where the backward pass starts.
// logits, dlogits: (N, V)  targets: (N) int32  rows: (N, 2) from the forward
void cross_entropy_backward(vk::Commands& cmd, vk::View logits, vk::View targets,
                            vk::View rows, vk::View dlogits, uint32_t N, uint32_t V,
                            uint32_t N_total);
// Evaluation: correct += number of rows whose argmax (first maximum) equals the target.
// logits: (N, V)  targets: (N) int32  correct: (1) uint32
void cross_entropy_accuracy(vk::Commands& cmd, vk::View logits, vk::View targets,
                            vk::View correct, uint32_t N, uint32_t V);
// The evaluation forward: the loss as cross_entropy_forward plus the accuracy count.
void cross_entropy_evaluate(vk::Commands& cmd, vk::View logits, vk::View targets, vk::View rows,
                            vk::View loss, vk::View correct, uint32_t N, uint32_t V,
                            uint32_t N_total);

}  // namespace brigade::ops
