// A cell's sets of layer activations: the tensors one micro-batch's forward writes (each
// layer's output and saved tensors, and on the model's last cell the loss's per-row scratch).
// Training keeps each in a buffer of its own until the backward has read it. A forward-only
// cell (evaluation, generation) needs a layer's output only until the next layer has read it,
// and its saved tensors only during its own forward (some layers compute through them: a GPT
// block's attention weights, its normalized inputs): its set holds two output buffers, which
// the layers take in turn, and one buffer for the saved tensors of the layer that runs.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/plan.h"
#include "vk/buffer.h"

namespace brigade::pipeline {

// Where a forward-only cell's set puts each tensor (CellLayout::output_bytes, saved_bytes).
struct ForwardSet {
  std::array<uint64_t, 2> outputs{};  // bytes of the two output buffers
  std::vector<uint32_t> output_in;    // per layer of the cell: the output buffer it writes (views: none)
  uint64_t saved = 0;                 // bytes of the saved tensors' buffer
  std::vector<std::vector<uint64_t>> saved_at;  // per layer, per saved tensor: its offset there
  uint64_t bytes() const { return outputs[0] + outputs[1] + saved; }
};
ForwardSet forward_set(const CellLayout& s);

// One set's buffers on the cell's device, as its CellLayout says (training or forward only).
struct ActivationSet {
  // Forward only: the output and saved tensors' buffers the tensors below are parts of
  // (null where nothing lies in one); they stay where they are however the set moves.
  std::vector<std::unique_ptr<vk::Buffer>> wholes;
  std::vector<vk::Buffer> outputs;             // per layer; empty for views
  std::vector<std::vector<vk::Buffer>> saved;  // per layer, per saved tensor
  vk::Buffer loss_rows;                        // the model's last cell
};
// `tag` begins each buffer's name ("stage 1 ").
ActivationSet make_set(vk::Device& device, const CellLayout& s, const std::string& tag);

}  // namespace brigade::pipeline
