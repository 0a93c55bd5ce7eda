#include "pipeline/plan.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "model/operand.h"
#include "ops/matmul_split.h"
#include "optim/clip.h"
#include "pipeline/activations.h"
#include "pipeline/plan_cut.h"
#include "pipeline/plan_limits.h"
#include "util/units.h"

#include "util/error.h"

namespace brigade::pipeline {

std::vector<uint32_t> split_rows(uint32_t rows, uint32_t micro_batches) {
  if (micro_batches == 0) throw UserError("`micro_batches` must be at least 1");
  if (micro_batches > rows)
    throw UserError("`micro_batches` " + std::to_string(micro_batches) + " is more than the " +
                    std::to_string(rows) + " samples of a mini-batch; expected at most " +
                    std::to_string(rows));
  std::vector<uint32_t> out(micro_batches, rows / micro_batches);
  for (uint32_t i = 0; i < rows % micro_batches; ++i) ++out[i];
  return out;
}

uint64_t total(const Bytes& b) {
  uint64_t t = 0;
  for (uint64_t v : b) t += v;
  return t;
}

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

CellLayout layout_cell(const model::Model& m, uint32_t cell, uint32_t first, uint32_t last,
                       bool last_cell, uint32_t max_rows, const CellBuffers& buffers,
                       const std::vector<ops::Precision>& precision, const DeviceFacts& facts) {
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
    uint64_t saved_half = 0;
    for (const model::SavedSpec& sv : layer.saved()) {
      const bool narrow = ops::is_half(prec) && !sv.wide && !layer.is_view();
      saved.push_back(ops::stored_bytes(sv.floats(max_rows), narrow ? prec : ops::Precision::Fp32));
      if (narrow && !direct) saved_half += model::aligned_floats(sv.floats(max_rows));  // each view aligned
    }
    saved_work = std::max(saved_work, saved_half);
    s.saved_bytes.push_back(std::move(saved));
    std::vector<uint64_t> deferred;
    if (buffers.deferreds)
      for (const model::SavedSpec& d : layer.deferred()) deferred.push_back(d.floats(max_rows) * kFloat);
    s.deferred_bytes.push_back(std::move(deferred));
    widest = std::max(widest, out);
    if (!layer.integer_input()) widest = std::max(widest, model::elements(layer.input_shape()));
    scratch = std::max(scratch, layer.cell_scratch_floats(max_rows, scratch_prec, lean, !buffers.training));
    // The weight copies a 16-bit layer's kernels read.
    std::vector<int32_t> copies_of;
    const ops::Precision stored_w = direct && layer.reads_half_weights() ? prec : ops::Precision::Fp32;
    for (const model::ParamSpec& p : layer.params()) {
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
    for (model::ParamSpec& p : layer.params())
      if (seen.insert(p.name).second) {
        if (p.kind == model::ParamKind::Trainable)
          s.norm_bytes += optim::grad_norm_bytes(uint32_t(p.elements()));
        s.params.push_back(std::move(p));
      }
  }
  std::set<std::string> outside;
  for (uint32_t l = 0; l < m.layers.size(); ++l)
    if (l < first || l >= last)
      for (const model::ParamSpec& p : m.layers[l]->params()) outside.insert(p.name);
  for (const model::ParamSpec& p : s.params)
    if (p.kind == model::ParamKind::Trainable && outside.count(p.name)) s.tied.push_back(p.name);
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

std::vector<LayerCost> layer_costs(const model::Model& m, uint32_t rows, uint32_t micro_batches,
                                   Remat remat, uint32_t optimizer_states, bool training) {
  std::vector<LayerCost> out;
  const double kept_rows = remat == Remat::Never && training ? rows : double(rows) / micro_batches;
  for (const auto& layer : m.layers) {
    const model::Cost c = layer->cost();
    uint64_t trainable = 0;
    for (const model::ParamSpec& p : layer->params())
      if (p.kind == model::ParamKind::Trainable) trainable += p.elements() * kFloat;
    LayerCost lc;
    lc.time = (training ? 3 : 1) * c.flops;
    lc.memory = c.param_bytes + (training ? trainable * (1 + optimizer_states) : 0) +
                uint64_t(double(c.activation_bytes) * kept_rows);
    out.push_back(lc);
  }
  return out;
}

namespace {

// The link slots a cell's device holds: activations forward and gradients backward (where
// the cell trains), each in kLinkSlots slots, at both of its boundaries, in the boundary
// tensor's precision; a local link (both cells on one device) holds one copy, counted with
// the cell before it.
uint64_t link_bytes(const model::Model& m, const CellLayout& s, bool local) {
  auto boundary = [&](uint32_t after_layer, ops::Precision p) {
    return (s.training ? 2 : 1) * kLinkSlots * ops::stored_bytes(model::elements(m.layers[after_layer]->output_shape()) * s.max_rows, p);
  };
  return (s.first > 0 && !local ? boundary(s.first - 1, s.input_precision) : 0) +
         (s.last < m.layers.size() ? boundary(s.last - 1, s.output_precision.back()) : 0);
}

}  // namespace

Bytes Plan::stage_memory(uint32_t k, uint32_t optimizer_states) const {
  Bytes b{};
  const uint32_t K = schedule.stages;
  for (size_t c = k; c < cells.size(); c += K) {
    const Bytes cell = cells[c].memory(optimizer_states);
    for (int i = 0; i < vk::kCategories; ++i) b[i] += cell[i];
  }
  return b;
}

Plan plan(const model::Model& m, const PlanOptions& o) {
  Plan p;
  p.micro_rows = split_rows(o.rows, o.micro_batches);
  const uint32_t K = uint32_t(o.stages.size()), V = o.virtual_stages, C = K * V;
  const uint32_t L = uint32_t(m.layers.size());
  p.schedule = build({o.schedule, K, o.micro_batches, V, o.remat});
  if (!o.training) p.schedule = forward_only(p.schedule);
  if (V > 1 && C > L)
    throw UserError(std::to_string(C) + " cells (" + std::to_string(K) + " stages x " + std::to_string(V) +
                    " virtual stages) for a model of " + std::to_string(L) + " layers; use at most " +
                    std::to_string(L) + " cells");
  p.slots = assign_slots(p.schedule);
  const Slots& slots = p.slots;
  std::vector<LayerCost> costs =
      layer_costs(m, o.rows, o.micro_batches, o.remat, o.optimizer_states, o.training);
  if (o.objective == Objective::Memory)
    for (LayerCost& c : costs) c.time = double(c.memory);
  // Cell c runs on stage c % K; with V cells a stage's cap is shared among them, in equal
  // shares for the partitioner, as the cells need where that finds no cut.
  std::vector<StageSpec> cells;
  for (uint32_t c = 0; c < C; ++c) {
    cells.push_back(o.stages[c % K]);
    cells.back().memory_cap /= V;
  }
  if (!o.layer_precision.empty() && o.layer_precision.size() != L)
    throw UserError(std::to_string(o.layer_precision.size()) + " layer precisions for a model of " + std::to_string(L) + " layers");
  if (o.precision.size() > 1 && o.precision.size() != K)
    throw UserError("`precision`: " + std::to_string(o.precision.size()) + " values for " + std::to_string(K) +
                    " stages; give one for all or one per stage");
  // Cells of different precisions alternating on a stage's device are not carried correctly
  // (the loss turns NaN): refused until they are.
  if (V > 1 && std::adjacent_find(o.precision.begin(), o.precision.end(), std::not_equal_to<>()) != o.precision.end())
    throw UserError("an interleaved schedule takes one `precision` for every stage, not " +
                    std::to_string(o.precision.size()) + " different ones");
  auto stage_precision = [&](size_t c) {
    return o.precision.empty() ? ops::Precision::Fp32 : o.precision[o.precision.size() == 1 ? 0 : c % K];
  };
  // Layer precisions as cell c sees them: its own layers its stage's, those before the cell
  // before's (which only the stored form of the cell's input depends on).
  auto precisions = [&](size_t c, size_t first, size_t last) {
    if (!o.layer_precision.empty()) return o.layer_precision;
    std::vector<ops::Precision> v(L, c ? stage_precision(c - 1) : ops::Precision::Fp32);
    std::fill(v.begin() + first, v.begin() + last, stage_precision(c));
    return v;
  };
  // A forward needs one input at a time; where the host writes them (the first cell's inputs,
  // the last's targets), two let it write the next micro-batch's while the device computes.
  const auto inputs = [&](size_t c, size_t last) {
    return o.training || (c && last < L) ? slots.inputs[c] : std::min(o.micro_batches, 2u);
  };
  auto layout = [&](size_t c, size_t first, size_t last) {
    CellLayout s = layout_cell(m, uint32_t(c), uint32_t(first), uint32_t(last), last == L, p.micro_rows[0],
                               {inputs(c, last), slots.sets[c], slots.deferreds[c], o.training},
                               precisions(c, first, last), o.stages[c % K].facts);
    s.link_bytes = link_bytes(m, s, K == 1);
    if (c < K) s.staging_bytes = o.stages[c].facts.staging_bytes;
    return s;
  };
  // A cell's footprint depends on its layers and how many inputs and sets it keeps, not on
  // which cell it is: each is laid out once, however often the partitioner asks.
  // (and on its stage's precision, the one before, and which layers its device's kernels
  // take in 16 bits). A cell with a buffer its device cannot hold never fits (kNeverFits).
  std::map<std::tuple<size_t, size_t, uint32_t, uint32_t, uint32_t, ops::Precision, ops::Precision, DeviceFacts, bool>,
           std::pair<uint64_t, bool>>
      footprints;
  const auto footprint = [&](size_t c, size_t first, size_t last) {
    const ops::Precision before = c ? stage_precision(c - 1) : ops::Precision::Fp32;
    const DeviceFacts& facts = o.stages[c % K].facts;
    const auto [it, fresh] = footprints.try_emplace({first, last, slots.inputs[c], slots.sets[c], slots.deferreds[c],
                                                     stage_precision(c), before, facts, c < K},
                                                    0, true);
    if (fresh) {
      const CellLayout s = layout(c, first, last);
      it->second = {total(s.memory(o.optimizer_states)), over_device_limits(s, facts, o.optimizer_states).empty()};
    }
    return it->second;
  };
  const CellMemory exact = [&](size_t c, size_t first, size_t last) {
    const auto [bytes, held] = footprint(c, first, last);
    return held ? bytes : kNeverFits;
  };
  const CellMemory bytes_only = [&](size_t c, size_t first, size_t last) { return footprint(c, first, last).first; };
  std::string no_cut;
  if (!o.balance.empty()) {
    if (V > 1 && o.balance.size() != C)
      throw UserError("`balance`: " + std::to_string(o.balance.size()) + " cell sizes for " + std::to_string(C) + " cells (" +
                      std::to_string(K) + " stages x " + std::to_string(V) + " virtual stages); give one size per cell");
    p.partition = balance_manual(costs, cells, o.balance);
  } else {
    try {
      p.partition = balance_within_limits(costs, cells, exact);
    } catch (const NoFit&) {
      // Interleaved, a stage's cap holds its cells together, however unevenly they share it.
      std::vector<uint32_t> sizes;
      if (V > 1) {
        std::vector<StageSpec> whole = cells;
        for (uint32_t c = 0; c < C; ++c) whole[c].memory_cap = o.stages[c % K].memory_cap;
        sizes = cut_under_stage_caps(costs, whole, K, exact);
      }
      // Else show the cut whose fullest stage needs the least memory, and where it overflows.
      if (sizes.empty()) {
        sizes = cut_least_memory(L, C, K, bytes_only);
        if (C > 1)
          no_cut = "no cut of " + m.name + " into " + std::to_string(C) + (V > 1 ? " cells" : " stages") + " fits";
      }
      p.partition = balance_manual(costs, cells, sizes);
    }
  }
  for (uint32_t c = 0; c < C; ++c) {
    const uint32_t first = p.partition.first_layer(c);
    p.cells.push_back(layout(c, first, first + p.partition.sizes[c]));
  }
  const auto least = [&](const std::string& under) {
    return no_cut.empty() ? "" : no_cut + under + "; in the one needing the least memory, ";
  };
  // The stage furthest over its cap, if any.
  double worst = 1;
  for (uint32_t k = 0; k < K; ++k) {
    const uint64_t cap = o.stages[k].memory_cap;
    const Bytes b = p.stage_memory(k, o.optimizer_states);
    const double ratio = cap ? double(total(b)) / double(cap) : 0;
    if (ratio > worst)
      worst = ratio, p.problem = least(" under `memory_cap`") + over_cap(k, b, o.stages[k], o);
  }
  if (p.problem.empty()) p.problem = over_device_memory(p, o);  // caps are limits besides the device's
  note_over_limits(p, o, least(" within its devices' limits"));  // cap or not
  if (!o.bubbles) return p;
  std::vector<double> forward;
  for (double t : p.partition.stage_time) forward.push_back(t / 3);
  p.bubble = simulated_bubble(p.schedule, forward);
  p.even_bubble = simulated_bubble(p.schedule);
  return p;
}

}  // namespace brigade::pipeline
