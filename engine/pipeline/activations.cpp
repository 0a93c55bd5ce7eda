#include "pipeline/activations.h"

#include <algorithm>

#include "util/error.h"

namespace brigade::pipeline {

ForwardSet forward_set(const CellLayout& s) {
  ForwardSet f;
  uint32_t next = 0;  // the output buffer the next layer that is no view writes
  for (size_t l = 0; l < s.output_bytes.size(); ++l) {
    // A view's output is its input, which the layer before wrote (output_bytes 0).
    f.output_in.push_back(s.output_bytes[l] ? next : UINT32_MAX);
    if (s.output_bytes[l]) {
      f.outputs[next] = std::max(f.outputs[next], s.output_bytes[l]);
      next ^= 1;
    }
    const vk::ArenaLayout saved = vk::arena_layout(s.saved_bytes[l]);  // each where a device binds one
    f.saved = std::max(f.saved, saved.bytes);
    f.saved_at.push_back(saved.offsets);
  }
  return f;
}

ActivationSet make_set(vk::Device& device, const CellLayout& s, const std::string& tag) {
  const auto act = vk::Category::Activations;
  ActivationSet set;
  const ForwardSet f = s.training ? ForwardSet{} : forward_set(s);
  if (!s.training) {
    const auto whole = [&](uint64_t bytes, const std::string& name) {
      return bytes ? std::make_unique<vk::Buffer>(device, bytes, act, tag + name) : nullptr;
    };
    set.wholes.push_back(whole(f.outputs[0], "outputs A"));
    set.wholes.push_back(whole(f.outputs[1], "outputs B"));
    set.wholes.push_back(whole(f.saved, "saved tensors"));
  }
  for (uint32_t l = 0; l < s.output_bytes.size(); ++l) {
    const std::string layer = tag + "layer " + std::to_string(s.first + l);
    const uint64_t out = s.output_bytes[l];
    if (!out)
      set.outputs.emplace_back();
    else if (s.training)
      set.outputs.emplace_back(device, out, act, layer + " output");
    else
      set.outputs.emplace_back(*set.wholes.at(f.output_in[l]), 0, out, layer + " output");
    std::vector<vk::Buffer> saved;
    for (size_t j = 0; j < s.saved_bytes[l].size(); ++j) {
      const uint64_t bytes = s.saved_bytes[l][j];
      if (s.training) saved.emplace_back(device, bytes, act, layer + " saved");
      else saved.emplace_back(*set.wholes.at(2), f.saved_at[l][j], bytes, layer + " saved");
    }
    set.saved.push_back(std::move(saved));
  }
  if (s.last_cell) set.loss_rows = vk::Buffer(device, s.loss_rows_bytes, act, tag + "loss rows");
  return set;
}

}  // namespace brigade::pipeline
