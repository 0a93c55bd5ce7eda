#include "pipeline/plan_limits.h"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "ops/precision.h"
#include "pipeline/activations.h"
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

std::string advice(Grows g, uint32_t rows) {
  switch (g) {
    case Grows::Rows:
      if (rows == 1) return "one sample is the least a micro-batch holds: make the model or its input smaller";
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

// "A, over its B", with the bytes too where the two round to the same figure.
std::string needs_over(uint64_t need, uint64_t cap) {
  std::string a = format_bytes(need), b = format_bytes(cap);
  if (a == b) a += " (" + std::to_string(need) + " bytes)", b += " (" + std::to_string(cap) + " bytes)";
  return a + ", over its " + b;
}

// "a, b, or c".
std::string either(const std::vector<std::string>& ways) {
  std::string s;
  for (size_t i = 0; i < ways.size(); ++i)
    s += (i == 0 ? "" : i + 1 < ways.size() ? ", " : ways.size() > 2 ? ", or " : " or ") + ways[i];
  return s;
}

// What shrinks a stage, after `add` ("add stages (`devices`)"); `heap`: for a device's memory.
std::string what_shrinks(const PlanOptions& o, const std::string& add, bool heap) {
  if (!o.training) {
    // A forward keeps one micro-batch's activations at a time: smaller micro-batches shrink
    // them, where a micro-batch holds more than one sample.
    std::vector<std::string> ways{add};
    if (o.micro_batches < o.rows) ways.push_back("use more micro-batches (`micro_batches`)");
    if (o.rows > 1) ways.push_back("a smaller batch (`rows`)");
    return either(ways);
  }
  // Without remat every micro-batch in flight keeps its activations, so more micro-batches
  // alone do not help; with it, they shrink the one set kept.
  std::string fewer = "use `remat` always with more micro-batches (`micro_batches`)";
  if (!heap && o.remat != Remat::Never) fewer = "use more micro-batches (`micro_batches`)";
  else if (!heap && o.micro_batches > 1) fewer = "use `remat` always or `schedule` 1f1b";
  return either({add, fewer, "a smaller mini-batch (`rows`)"});
}

}  // namespace

std::string over_cap(uint32_t k, const Bytes& b, const StageSpec& spec, const PlanOptions& o) {
  std::vector<int> order;
  for (int c = 0; c < vk::kCategories; ++c)
    if (b[c]) order.push_back(c);
  std::sort(order.begin(), order.end(), [&](int x, int y) { return b[x] > b[y]; });
  std::string what = "stage " + std::to_string(k) + (spec.device.empty() ? "" : " (" + spec.device + ")") +
                     " needs " + needs_over(total(b), spec.memory_cap) + " `memory_cap`: ";
  for (size_t i = 0; i < order.size() && i < 3; ++i)
    what += std::string(i ? ", " : "") + vk::category_name(vk::Category(order[i])) + " " + format_bytes(b[order[i]]);
  return what + "; " + what_shrinks(o, "add stages (`devices`)", false);
}

std::string over_device_memory(const Plan& p, const PlanOptions& o) {
  struct Use {
    uint64_t bytes = 0, heap = 0;
    std::string stages;  // "0, 1"
  };
  std::map<uint32_t, Use> by_physical;
  for (uint32_t k = 0; k < o.stages.size(); ++k) {
    Use& u = by_physical[o.stages[k].physical];
    u.bytes += total(p.stage_memory(k, o.optimizer_states));
    u.stages += (u.stages.empty() ? "" : ", ") + std::to_string(k);
    u.heap = std::max(u.heap, o.stages[k].device_memory);
  }
  const bool capped = std::any_of(o.stages.begin(), o.stages.end(), [](const StageSpec& st) { return st.memory_cap; });
  for (const auto& [index, u] : by_physical)
    if (u.heap && u.bytes > u.heap) {
      const bool one = u.stages.find(',') == std::string::npos;
      return std::string(one ? "stage " : "stages ") + u.stages + " on device " + std::to_string(index) +
             (one ? " needs " : " need ") + needs_over(u.bytes, u.heap) + " of device-local memory; " +
             what_shrinks(o, "add devices or stages", true) +
             (capped ? "" : " (or set each stage's cap yourself with `memory_cap`)");
    }
  return {};
}

std::string over_device_limits(const CellLayout& s, const DeviceFacts& facts, uint32_t optimizer_states) {
  if (!facts.max_binding && !facts.max_allocation) return {};
  // The first buffer over a limit, in the order below; `name()` is asked of that one alone (a
  // plan asks this of every cell it lays out).
  std::optional<Item> over;
  const auto add = [&](const auto& name, uint64_t bytes, bool bound, Grows grows) {
    const bool unbound = bound && facts.max_binding && bytes > facts.max_binding;
    if (!over && (unbound || (facts.max_allocation && bytes > facts.max_allocation)))
      over = Item{std::string(name()), bytes, bound, grows};
  };
  const auto text = [](const char* t) { return [t] { return t; }; };
  add(text("input"), s.input_bytes, true, Grows::Rows);
  add(text("targets"), s.target_bytes, true, Grows::Rows);
  add(text("loss rows"), s.loss_rows_bytes, true, Grows::Rows);
  for (size_t l = 0; l < s.output_bytes.size(); ++l) {
    const auto layer = [&](const char* what) { return [&, what] { return "layer " + std::to_string(s.first + l) + what; }; };
    add(layer(" output"), s.output_bytes[l], true, Grows::Rows);
    for (uint64_t b : s.saved_bytes[l]) add(layer(" saved"), b, true, Grows::Rows);
    if (s.deferreds)
      for (uint64_t b : s.deferred_bytes[l]) add(layer(" deferred"), b, true, Grows::Rows);
  }
  add(text("activation gradient"), s.gradient_bytes, true, Grows::Rows);
  add(text("activation gradient, packed"), s.gradient_copy_bytes, true, Grows::Rows);
  add(text("input gradient, packed"), s.gradient_out_bytes, true, Grows::Rows);
  add(text("fp32 work part"), s.work_part_bytes, true, Grows::Rows);
  add(text("fp32 work"), s.work_bytes, false, Grows::Rows);
  add(text("scratch"), s.scratch_bytes, false, Grows::Rows);
  add(text("products' workspace"), s.workspace_bytes, false, Grows::Fixed);
  for (const model::ParamSpec& p : s.params) add([&] { return p.name; }, p.elements() * kFloat, true, Grows::Tensor);
  for (const CellLayout::WeightCopy& c : s.weight_copies)
    add([&] { return c.name + " " + ops::precision_name(c.round); }, ops::stored_bytes(c.elements, c.stored), true, Grows::Tensor);
  if (!s.training) add(text("saved tensors"), forward_set(s).saved, false, Grows::Rows);  // one layer's
  const uint64_t arena = s.arena().bytes;
  add(text("parameters"), arena, false, Grows::Parameters);
  if (s.training) add(text("gradients"), arena, false, Grows::Parameters);
  if (optimizer_states && s.training) add(text("optimizer state"), arena, false, Grows::Parameters);
  add(text("weight copies"), s.copy_arena().bytes, false, Grows::Parameters);
  if (!over) return {};
  const Item& i = *over;
  const bool unbound = i.bound && facts.max_binding && i.bytes > facts.max_binding;
  const std::string kind = i.grows == Grows::Parameters ? "'" + i.what + "' arena" : "tensor '" + i.what + "'";
  const uint64_t limit = unbound ? facts.max_binding : facts.max_allocation;
  std::string need = format_bytes(i.bytes), most = format_bytes(limit);
  if (need == most) need += " (" + std::to_string(i.bytes) + " bytes)", most += " (" + std::to_string(limit) + " bytes)";
  return kind + " is " + need + ", over this device's " +
         (unbound ? "maxStorageBufferRange of " + most + ", the most a kernel binds"
                  : "maxMemoryAllocationSize of " + most + ", its largest allocation") +
         "; " + advice(i.grows, s.max_rows);
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
