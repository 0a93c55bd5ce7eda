#include "pipeline/plan_limits.h"

#include <vector>

#include "ops/precision.h"
#include "util/units.h"

namespace brigade::pipeline {

namespace {

// What to change for each kind of buffer.
enum class Grows {
  Rows,        // with the rows of a micro-batch: activations, their gradients, the scratch
  Parameters,  // with the parameters a stage holds: its arenas
  Tensor,      // one parameter: no cut or batch splits it
  Fixed,       // the products' workspace
};

struct Item {
  std::string what;
  uint64_t bytes = 0;
  bool bound = false;  // a kernel binds it whole
  Grows grows = Grows::Rows;
};

std::string advice(Grows g) {
  switch (g) {
    case Grows::Rows:
      return "use more micro-batches (`micro_batches`) or a smaller mini-batch (`rows`)";
    case Grows::Parameters:
      return "add stages (`devices`) so that each holds fewer parameters";
    case Grows::Tensor:
      return "a parameter is never split across stages or micro-batches: make the layer smaller";
    case Grows::Fixed:
      break;
  }
  return "use a device with a larger limit";
}

}  // namespace

std::string over_device_limits(const CellLayout& s, const DeviceFacts& facts, uint32_t optimizer_states) {
  if (!facts.max_binding && !facts.max_allocation) return {};
  std::vector<Item> items;
  const auto add = [&](std::string what, uint64_t bytes, bool bound, Grows grows) {
    if (bytes) items.push_back({std::move(what), bytes, bound, grows});
  };
  add("input", s.input_bytes, true, Grows::Rows);
  add("targets", s.target_bytes, true, Grows::Rows);
  add("loss rows", s.loss_rows_bytes, true, Grows::Rows);
  for (size_t l = 0; l < s.output_bytes.size(); ++l) {
    const std::string layer = "layer " + std::to_string(s.first + l);
    add(layer + " output", s.output_bytes[l], true, Grows::Rows);
    for (uint64_t b : s.saved_bytes[l]) add(layer + " saved", b, true, Grows::Rows);
    if (s.deferreds)
      for (uint64_t b : s.deferred_bytes[l]) add(layer + " deferred", b, true, Grows::Rows);
  }
  add("activation gradient", s.gradient_bytes, true, Grows::Rows);
  add("activation gradient, packed", s.gradient_copy_bytes, true, Grows::Rows);
  add("input gradient, packed", s.gradient_out_bytes, true, Grows::Rows);
  add("fp32 work part", s.work_part_bytes, true, Grows::Rows);
  add("fp32 work", s.work_bytes, false, Grows::Rows);
  add("scratch", s.scratch_bytes, false, Grows::Rows);
  add("products' workspace", s.workspace_bytes, false, Grows::Fixed);
  for (const model::ParamSpec& p : s.params) add(p.name, p.elements() * kFloat, true, Grows::Tensor);
  for (const CellLayout::WeightCopy& c : s.weight_copies)
    add(c.name + " " + ops::precision_name(c.round), ops::stored_bytes(c.elements, c.stored), true, Grows::Tensor);
  const uint64_t arena = s.arena().bytes;
  add("parameters", arena, false, Grows::Parameters);
  add("gradients", arena, false, Grows::Parameters);
  if (optimizer_states) add("optimizer state", arena, false, Grows::Parameters);
  add("weight copies", s.copy_arena().bytes, false, Grows::Parameters);
  for (const Item& i : items) {
    const bool unbound = i.bound && facts.max_binding && i.bytes > facts.max_binding;
    const bool too_large = facts.max_allocation && i.bytes > facts.max_allocation;
    if (!unbound && !too_large) continue;
    const std::string kind = i.grows == Grows::Parameters ? "'" + i.what + "' arena" : "tensor '" + i.what + "'";
    const uint64_t limit = unbound ? facts.max_binding : facts.max_allocation;
    std::string need = format_bytes(i.bytes), most = format_bytes(limit);
    if (need == most) need += " (" + std::to_string(i.bytes) + " bytes)", most += " (" + std::to_string(limit) + " bytes)";
    return kind + " is " + need + ", over this device's " +
           (unbound ? "maxStorageBufferRange of " + most + ", the most a kernel binds"
                    : "maxMemoryAllocationSize of " + most + ", its largest allocation") +
           "; " + advice(i.grows);
  }
  return {};
}

void note_over_limits(Plan& p, const PlanOptions& o, const std::string& prefix) {
  const uint32_t K = uint32_t(o.stages.size()), C = uint32_t(p.cells.size());
  p.over_limits.assign(K, {});
  for (uint32_t c = 0; c < C; ++c) {
    const uint32_t k = c % K;
    if (!p.over_limits[k].empty()) continue;
    p.over_limits[k] = over_device_limits(p.cells[c], o.stages[k].facts, o.optimizer_states);
    if (p.over_limits[k].empty() || !p.problem.empty()) continue;
    p.problem = prefix + (C > K ? "cell " + std::to_string(c) + " of " : std::string()) + "stage " + std::to_string(k) +
                (o.stages[k].device.empty() ? "" : " (" + o.stages[k].device + ")") + ": " + p.over_limits[k];
  }
}

}  // namespace brigade::pipeline
