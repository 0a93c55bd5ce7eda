// The layout of one cell: every buffer a stage allocates for a run of the model's layers,
// and the bytes each takes (pipeline/plan.h).
#include <algorithm>
#include <map>
#include <set>

#include "model/operand.h"
#include "ops/matmul_split.h"
#include "optim/clip.h"
#include "pipeline/activations.h"
#include "pipeline/plan.h"
#include "util/error.h"

namespace brigade::pipeline {

namespace {

uint64_t cat(vk::Category c) { return uint64_t(c); }

}  // namespace

vk::ArenaLayout CellLayout::arena() const {
  std::vector<uint64_t> sizes;
  for (const model::ParamSpec& p : params)
    if (p.kind == model::ParamKind::Trainable) sizes.push_back(p.elements() * kFloat);
  return vk::arena_layout(sizes);
}

vk::ArenaLayout CellLayout::copy_arena() const {
  std::vector<uint64_t> sizes;
  for (const WeightCopy& c : weight_copies) sizes.push_back(ops::stored_bytes(c.elements, c.stored));
  return vk::arena_layout(sizes);
}

Bytes CellLayout::memory(uint32_t optimizer_states) const {
  Bytes b{};
  for (const model::ParamSpec& p : params) {
    const uint64_t bytes = p.elements() * kFloat;
    if (p.kind == model::ParamKind::State) b[cat(vk::Category::Scratch)] += bytes;
    if (p.kind == model::ParamKind::Buffer) b[cat(vk::Category::Parameters)] += bytes;
  }
  const uint64_t arena = this->arena().bytes;  // the trainable ones
  b[cat(vk::Category::Parameters)] += arena + copy_arena().bytes;
  b[cat(vk::Category::Gradients)] += training ? arena : 0;
  b[cat(vk::Category::Optimizer)] += training ? arena * optimizer_states : 0;
  uint64_t set = loss_rows_bytes + (training ? 0 : forward_set(*this).bytes());
  for (size_t l = 0; l < output_bytes.size() && training; ++l) {
    set += output_bytes[l];
    for (uint64_t s : saved_bytes[l]) set += s;
  }
  uint64_t deferred = 0;
  for (const auto& layer : deferred_bytes)
    for (uint64_t d : layer) deferred += d;
  b[cat(vk::Category::Activations)] = inputs * (input_bytes + target_bytes) + sets * set + deferreds * deferred +
                                      2 * gradient_bytes + 2 * gradient_copy_bytes + gradient_out_bytes;
  b[cat(vk::Category::Transfer)] = link_bytes + staging_bytes;
  for (const model::ParamSpec& p : params)  // the tied sums' host memory
    if (std::find(tied.begin(), tied.end(), p.name) != tied.end())
      b[cat(vk::Category::Transfer)] += p.elements() * kFloat;
  b[cat(vk::Category::Scratch)] += scratch_bytes + workspace_bytes + norm_bytes + work_bytes + (last_cell ? 3 * kFloat : 0);  // loss, discard, correct
  return b;
}

std::vector<ops::Precision> output_precisions(const model::Model& m, const std::vector<ops::Precision>& precision) {
  std::vector<ops::Precision> out(m.layers.size(), ops::Precision::Fp32);
  if (precision.empty()) return out;
  BRIGADE_EXPECT(precision.size() == m.layers.size(), "one precision per layer");
  for (size_t l = 0; l < out.size(); ++l)
    out[l] = !m.layers[l]->is_view() ? precision[l] : l ? out[l - 1] : ops::Precision::Fp32;
  return out;
}

DeviceFacts device_facts(const model::Model& m, const vk::PhysicalInfo& info) {
  // A tensor in an arena is bound to its padding's end (vk::kArenaAlign): what fits the range padded
  // is what a multiple of 256 under it holds (NVIDIA lists 2^32 - 1).
  return {m.stores_half(info), m.lean_scratch(info), ops::matmul_workspace_bytes(info),
          info.max_storage_buffer_range / vk::kArenaAlign * vk::kArenaAlign, info.max_allocation_size,
          info.device_memory_mapped ? 0 : vk::kStagingBytes};
}

ModelSpecs::ModelSpecs(const model::Model& m) : model(m) {
  std::map<std::string, std::vector<uint32_t>> holders;
  for (uint32_t l = 0; l < m.layers.size(); ++l) {
    params.push_back(m.layers[l]->params());
    saved.push_back(m.layers[l]->saved());
    deferred.push_back(m.layers[l]->deferred());
    for (const model::ParamSpec& p : params.back()) holders[p.name].push_back(l);
  }
  for (auto& [name, layers] : holders)
    if (layers.size() > 1) shared.emplace(name, std::move(layers));
}

CellLayout layout_cell(const model::Model& m, uint32_t cell, uint32_t first, uint32_t last,
                       bool last_cell, uint32_t max_rows, const CellBuffers& buffers,
                       const std::vector<ops::Precision>& precision, const DeviceFacts& facts) {
  return layout_cell(ModelSpecs(m), cell, first, last, last_cell, max_rows, buffers, precision, facts);
}

CellLayout layout_cell(const ModelSpecs& specs, uint32_t cell, uint32_t first, uint32_t last,
                       bool last_cell, uint32_t max_rows, const CellBuffers& buffers,
                       const std::vector<ops::Precision>& precision, const DeviceFacts& facts) {
  const model::Model& m = specs.model;
  BRIGADE_EXPECT(first < last && last <= m.layers.size(), "a cell holds layers [first, last)");
  BRIGADE_EXPECT(facts.stores_half.empty() || facts.stores_half.size() == m.layers.size(), "stores_half has one entry per layer");
  BRIGADE_EXPECT(facts.lean_scratch.empty() || facts.lean_scratch.size() == m.layers.size(), "lean_scratch has one entry per layer");
  CellLayout s;
  s.cell = cell, s.first = first, s.last = last;
  s.first_cell = first == 0, s.last_cell = last_cell;
  s.max_rows = max_rows, s.inputs = buffers.inputs, s.sets = buffers.sets, s.deferreds = buffers.deferreds;
  s.workspace_bytes = facts.workspace_bytes;
  const std::vector<ops::Precision> stored = output_precisions(m, precision);
  s.input_precision = first ? stored[first - 1] : ops::Precision::Fp32;
  const uint64_t in = model::elements(m.layers[first]->input_shape()) * max_rows;
  s.input_bytes = ops::stored_bytes(in, s.input_precision);
  if (!s.first_cell && ops::is_half(s.input_precision)) s.gradient_out_bytes = s.input_bytes;
  uint64_t widest = 0, scratch = 0, saved_work = 0, work_part = 0;
  bool copies = false;  // a layer on fp32 copies
  std::set<std::string> seen;
  // A plan lays out many cells: each vector is allocated once.
  const size_t n = last - first;
  size_t n_params = 0;
  for (uint32_t l = first; l < last; ++l) n_params += specs.params[l].size();
  s.params.reserve(n_params);
  s.direct.reserve(n), s.lean.reserve(n), s.scratch_precision.reserve(n), s.converted.reserve(n);
  s.output_precision.reserve(n), s.output_bytes.reserve(n), s.saved_bytes.reserve(n), s.deferred_bytes.reserve(n);
  s.weight_copy.reserve(n);
  for (uint32_t l = first; l < last; ++l) {
    const model::Layer& layer = *m.layers[l];
    const uint64_t out = model::elements(layer.output_shape());
    const ops::Precision prec = stored[l];
    const ops::Precision before = l == first ? s.input_precision : stored[l - 1];
    const bool x_half = ops::is_half(before) && !layer.integer_input();
    const bool touches_half = !layer.is_view() && (x_half || ops::is_half(prec));
    const bool direct = touches_half && !facts.stores_half.empty() && facts.stores_half[l];
    s.direct.push_back(direct);
    const bool lean = direct && !facts.lean_scratch.empty() && (facts.lean_scratch[l] >> uint32_t(prec) & 1u);
    s.lean.push_back(lean);
    const ops::Precision scratch_prec = !direct ? ops::Precision::Fp32 : ops::is_half(prec) ? prec : before;
    s.scratch_precision.push_back(scratch_prec);
    s.converted.push_back(touches_half && !direct);
    if (touches_half && !direct) {
      copies = true;
      work_part = std::max({work_part, x_half ? model::elements(layer.input_shape()) : 0, out});
    }
    s.output_precision.push_back(prec);
    s.output_bytes.push_back(layer.is_view() ? 0 : ops::stored_bytes(out * max_rows, prec));
    std::vector<uint64_t> saved;
    saved.reserve(specs.saved[l].size());
    uint64_t saved_half = 0;
    for (const model::SavedSpec& sv : specs.saved[l]) {
      const bool narrow = ops::is_half(prec) && !sv.wide && !layer.is_view();
      saved.push_back(ops::stored_bytes(sv.floats(max_rows), narrow ? prec : ops::Precision::Fp32));
      if (narrow && !direct) saved_half += model::aligned_floats(sv.floats(max_rows));  // each view aligned
    }
    saved_work = std::max(saved_work, saved_half);
    s.saved_bytes.push_back(std::move(saved));
    std::vector<uint64_t> deferred;
    if (buffers.deferreds)
      for (const model::SavedSpec& d : specs.deferred[l]) deferred.push_back(d.floats(max_rows) * kFloat);
    s.deferred_bytes.push_back(std::move(deferred));
    widest = std::max(widest, out);
    if (!layer.integer_input()) widest = std::max(widest, model::elements(layer.input_shape()));
    scratch = std::max(scratch, layer.cell_scratch_floats(max_rows, scratch_prec, lean, !buffers.training));
    // The weight copies a 16-bit layer's kernels read.
    std::vector<int32_t> copies_of;
    copies_of.reserve(specs.params[l].size());
    const ops::Precision stored_w = direct && layer.reads_half_weights() ? prec : ops::Precision::Fp32;
    for (const model::ParamSpec& p : specs.params[l]) {
      if (!p.product || !ops::is_half(prec) || layer.is_view()) {
        copies_of.push_back(-1);
        continue;
      }
      const auto same = [&](const CellLayout::WeightCopy& c) {
        return c.name == p.name && c.stored == stored_w && c.round == prec;
      };
      auto it = std::find_if(s.weight_copies.begin(), s.weight_copies.end(), same);
      if (it == s.weight_copies.end())
        it = s.weight_copies.insert(s.weight_copies.end(), {p.name, p.elements(), stored_w, prec});
      copies_of.push_back(int32_t(it - s.weight_copies.begin()));
    }
    s.weight_copy.push_back(std::move(copies_of));
    for (const model::ParamSpec& p : specs.params[l]) {
      const auto holders = specs.shared.find(p.name);
      if (holders != specs.shared.end()) {
        if (!seen.insert(p.name).second) continue;  // an earlier layer of the cell holds it
        const auto outside = [&](uint32_t h) { return h < first || h >= last; };
        if (p.kind == model::ParamKind::Trainable && std::any_of(holders->second.begin(), holders->second.end(), outside))
          s.tied.push_back(p.name);
      }
      if (p.kind == model::ParamKind::Trainable) s.norm_bytes += optim::grad_norm_bytes(uint32_t(p.elements()));
      s.params.push_back(p);
    }
  }
  s.gradient_bytes = widest * max_rows * kFloat;
  // Input gradients handed on packed: layer l writes its dx's copy where the layer right
  // before it in the cell reads one, both on their stored tensors, the boundary in 16 bits.
  s.gradient_copies.assign(last - first, false);
  for (uint32_t l = first + 1; l < last; ++l) {
    const model::Layer& layer = *m.layers[l];
    const model::Layer& before = *m.layers[l - 1];
    if (s.direct[l - first] && s.direct[l - 1 - first] && ops::is_half(stored[l - 1]) && !before.is_view() &&
        layer.writes_input_gradient_copy() && before.reads_output_gradient_copy()) {
      s.gradient_copies[l - first] = true;
      s.gradient_copy_bytes = std::max(s.gradient_copy_bytes,
                                       ops::stored_bytes(model::elements(layer.input_shape()) * max_rows, stored[l - 1]));
    }
  }
  s.scratch_bytes = scratch * kFloat;
  // The loss reads the last layer's output in fp32 from part 0.
  if (last_cell && ops::is_half(stored[last - 1]))
    copies = true, work_part = std::max(work_part, model::elements(m.layers[last - 1]->output_shape()));
  if (copies) {
    // Parts 1 and 2 and the saved tensors in 2 start where a device binds a view.
    s.work_part_bytes = model::aligned_floats(work_part * max_rows) * kFloat;
    s.work_bytes = 2 * s.work_part_bytes + saved_work * kFloat;
  }
  if (last_cell) {
    s.target_bytes = uint64_t(m.targets_per_sample) * max_rows * kFloat;
    s.loss_rows_bytes = uint64_t(m.targets_per_sample) * max_rows * 2 * kFloat;
  }
  if (!buffers.training) {  // what only a backward or the step reads or writes
    s.training = false;
    s.gradient_bytes = s.gradient_copy_bytes = s.gradient_out_bytes = s.norm_bytes = 0;
    // The workspace holds a split K's parts (weight gradients) and column sums' runs (bias and
    // LayerNorm gradients); a forward's products run whole without it.
    s.workspace_bytes = 0;
    s.gradient_copies.assign(last - first, false);
    s.tied.clear();  // their gradients' sums on the host
  }
  return s;
}

}  // namespace brigade::pipeline
