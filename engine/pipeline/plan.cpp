#include "pipeline/plan.h"

#include <algorithm>
#include <set>

#include "vk/check.h"

namespace brigade::pipeline {

std::vector<uint32_t> split_rows(uint32_t rows, uint32_t micro_batches) {
  if (micro_batches == 0) throw UserError("--micro-batches must be at least 1");
  if (micro_batches > rows)
    throw UserError("--micro-batches " + std::to_string(micro_batches) + " is more than the " +
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

constexpr uint64_t kFloat = 4;

uint64_t cat(vk::Category c) { return uint64_t(c); }

}  // namespace

Bytes StageLayout::memory(uint32_t optimizer_states) const {
  Bytes b{};
  for (const model::ParamSpec& p : params) {
    const uint64_t bytes = p.elements() * kFloat;
    if (p.kind == model::ParamKind::State) {
      b[cat(vk::Category::Scratch)] += bytes;
      continue;
    }
    b[cat(vk::Category::Parameters)] += bytes;
    if (p.kind == model::ParamKind::Trainable) {
      b[cat(vk::Category::Gradients)] += bytes;
      b[cat(vk::Category::Optimizer)] += bytes * optimizer_states;
    }
  }
  uint64_t set = loss_rows_bytes;
  for (size_t l = 0; l < output_bytes.size(); ++l) {
    set += output_bytes[l];
    for (uint64_t s : saved_bytes[l]) set += s;
  }
  b[cat(vk::Category::Activations)] =
      micro_batches * (input_bytes + target_bytes) + sets * set + 2 * gradient_bytes;
  b[cat(vk::Category::Transfer)] = link_bytes;
  b[cat(vk::Category::Scratch)] += scratch_bytes + (last_stage ? 3 * kFloat : 0);  // loss, discard, correct
  return b;
}

StageLayout layout_stage(const model::Model& m, uint32_t stage, uint32_t first, uint32_t last,
                         bool last_stage, uint32_t max_rows, uint32_t micro_batches, Remat remat) {
  BRIGADE_EXPECT(first < last && last <= m.layers.size(), "a cell holds layers [first, last)");
  StageLayout s;
  s.stage = stage, s.first = first, s.last = last;
  s.first_stage = first == 0, s.last_stage = last_stage;
  s.max_rows = max_rows, s.micro_batches = micro_batches;
  s.sets = remat == Remat::Never ? micro_batches : 1;
  s.input_bytes = model::elements(m.layers[first]->input_shape()) * max_rows * kFloat;
  uint64_t widest = 0, scratch = 0;
  std::set<std::string> seen;
  for (uint32_t l = first; l < last; ++l) {
    const model::Layer& layer = *m.layers[l];
    const uint64_t out = model::elements(layer.output_shape());
    s.output_bytes.push_back(layer.is_view() ? 0 : out * max_rows * kFloat);
    std::vector<uint64_t> saved;
    for (const model::SavedSpec& sv : layer.saved()) saved.push_back(sv.floats(max_rows) * kFloat);
    s.saved_bytes.push_back(std::move(saved));
    widest = std::max(widest, out);
    if (!layer.integer_input()) widest = std::max(widest, model::elements(layer.input_shape()));
    scratch = std::max(scratch, layer.scratch_per_sample());
    for (model::ParamSpec& p : layer.params())
      if (seen.insert(p.name).second) s.params.push_back(std::move(p));
  }
  s.gradient_bytes = widest * max_rows * kFloat;
  s.scratch_bytes = scratch * max_rows * kFloat;
  if (last_stage) {
    s.target_bytes = uint64_t(m.targets_per_sample) * max_rows * kFloat;
    s.loss_rows_bytes = uint64_t(m.targets_per_sample) * max_rows * 2 * kFloat;
  }
  return s;
}

std::vector<LayerCost> layer_costs(const model::Model& m, uint32_t rows, uint32_t micro_batches,
                                   Remat remat, uint32_t optimizer_states) {
  std::vector<LayerCost> out;
  const double kept_rows = remat == Remat::Never ? rows : double(rows) / micro_batches;
  for (const auto& layer : m.layers) {
    const model::Cost c = layer->cost();
    uint64_t trainable = 0;
    for (const model::ParamSpec& p : layer->params())
      if (p.kind == model::ParamKind::Trainable) trainable += p.elements() * kFloat;
    LayerCost lc;
    lc.time = 3 * c.flops;
    lc.memory = c.param_bytes + trainable * (1 + optimizer_states) +
                uint64_t(double(c.activation_bytes) * kept_rows);
    out.push_back(lc);
  }
  return out;
}

Plan plan(const model::Model& m, const PlanOptions& o) {
  Plan p;
  p.micro_rows = split_rows(o.rows, o.micro_batches);
  const uint32_t K = uint32_t(o.stages.size());
  std::vector<LayerCost> costs =
      layer_costs(m, o.rows, o.micro_batches, o.remat, o.optimizer_states);
  if (o.objective == Objective::Memory)
    for (LayerCost& c : costs) c.time = double(c.memory);
  p.partition = o.balance.empty() ? balance_min_max(costs, o.stages)
                                  : balance_manual(costs, o.stages, o.balance);
  for (uint32_t k = 0; k < K; ++k) {
    const uint32_t first = p.partition.first_layer(k);
    p.stages.push_back(layout_stage(m, k, first, first + p.partition.sizes[k], k + 1 == K,
                                    p.micro_rows[0], o.micro_batches, o.remat));
  }
  for (uint32_t k = 0; k + 1 < K; ++k) {
    // Activations forward and gradients backward, each in kLinkSlots slots, seen by both
    // devices of the boundary.
    const StageLayout& l = p.stages[k];
    const uint64_t boundary =
        model::elements(m.layers[l.last - 1]->output_shape()) * l.max_rows * kFloat;
    p.stages[k].link_bytes += 2 * kLinkSlots * boundary;
    p.stages[k + 1].link_bytes += 2 * kLinkSlots * boundary;
  }
  p.bubble = bubble_fraction(K, o.micro_batches);
  return p;
}

}  // namespace brigade::pipeline
