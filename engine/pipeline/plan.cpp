#include "pipeline/plan.h"

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>

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
  const ModelSpecs specs(m);
  auto layout = [&](size_t c, size_t first, size_t last) {
    CellLayout s = layout_cell(specs, uint32_t(c), uint32_t(first), uint32_t(last), last == L, p.micro_rows[0],
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
  // Stages of equal facts are keyed by the first of them.
  std::vector<uint32_t> facts_key(K);
  for (uint32_t k = 0; k < K; ++k)
    facts_key[k] = uint32_t(std::find_if(o.stages.begin(), o.stages.end(),
                                         [&](const StageSpec& st) { return st.facts == o.stages[k].facts; }) -
                            o.stages.begin());
  std::map<std::tuple<size_t, size_t, uint32_t, uint32_t, uint32_t, ops::Precision, ops::Precision, uint32_t, bool>,
           std::pair<uint64_t, bool>>
      footprints;
  const auto footprint = [&](size_t c, size_t first, size_t last) {
    const ops::Precision before = c ? stage_precision(c - 1) : ops::Precision::Fp32;
    const DeviceFacts& facts = o.stages[c % K].facts;
    const auto [it, fresh] = footprints.try_emplace({first, last, slots.inputs[c], slots.sets[c], slots.deferreds[c],
                                                     stage_precision(c), before, facts_key[c % K], c < K},
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
  // A floor under each cell's footprint that lays nothing out: its trainable parameters (each
  // counted at the first layer holding it), with their gradients and optimizer state where it
  // trains. The partitioner's many cells too long for a cap go no further.
  std::vector<uint64_t> trainable(L + 1, 0);
  for (uint32_t l = 0; l < L; ++l) {
    trainable[l + 1] = trainable[l];
    for (const model::ParamSpec& s : specs.params[l]) {
      const auto holders = specs.shared.find(s.name);
      if (s.kind == model::ParamKind::Trainable && (holders == specs.shared.end() || holders->second.front() == l))
        trainable[l + 1] += s.elements() * kFloat;
    }
  }
  const uint64_t copies = o.training ? 2 + o.optimizer_states : 1;
  const CellMemory floor = [&](size_t, size_t first, size_t last) { return (trainable[last] - trainable[first]) * copies; };
  std::string no_cut;
  if (!o.balance.empty()) {
    if (V > 1 && o.balance.size() != C)
      throw UserError("`balance`: " + std::to_string(o.balance.size()) + " cell sizes for " + std::to_string(C) + " cells (" +
                      std::to_string(K) + " stages x " + std::to_string(V) + " virtual stages); give one size per cell");
    p.partition = balance_manual(costs, cells, o.balance);
  } else {
    try {
      p.partition = balance_within_limits(costs, cells, exact, floor);
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
        sizes = cut_least_memory(L, C, K, bytes_only, floor);
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
