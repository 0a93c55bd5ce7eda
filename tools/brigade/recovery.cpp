#include "recovery.h"

#include <algorithm>
#include <cmath>

#include "ranks.h"
#include "vk/buffer.h"

namespace brigade::cli {

io::Checkpoint capture(const model::Model& m, uint64_t step, const Pipeline& p, const optim::Optimizer& opt,
                       const optim::LossScale& scaler) {
  for (const auto& dev : p.devices)
    if (dev) dev->begin_action("capture");
  pipeline::Executor& ex = *p.executor;
  io::Checkpoint c;
  c.step = step, c.loss_scale = scaler;
  const std::vector<std::string> held = ex.held();
  for (const model::ParamSpec& spec : m.params())
    if (spec.kind != model::ParamKind::State && std::find(held.begin(), held.end(), spec.name) != held.end())
      c.params[spec.name] = ex.parameter(spec.name);
  for (const auto& [name, buffer] : opt.state()) {
    if (c.optimizer.count(name)) continue;  // a tied parameter's copies hold the same state
    std::vector<float> v(buffer->size() / sizeof(float));
    vk::download(*buffer, v.data(), buffer->size());
    c.optimizer[name] = std::move(v);
  }
  return c;
}

void restore(const io::Checkpoint& c, pipeline::Executor& ex, optim::Optimizer& opt, const std::string& source) {
  const std::vector<std::string> held = ex.held();
  for (const auto& [name, values] : c.params)
    if (std::find(held.begin(), held.end(), name) != held.end()) ex.set_parameter(name, values);
  for (const auto& [name, buffer] : opt.state()) {
    const auto it = c.optimizer.find(name);
    if (it == c.optimizer.end()) throw UserError(source + ": optimizer state '" + name + "' is missing");
    try {
      opt.load_state(name, it->second);
    } catch (const UserError& e) {
      throw UserError(source + ": " + e.what());
    }
  }
}

void save(const std::string& path, const model::Model& m, const Settings& s, io::Checkpoint c) {
  c.seed = s.seed, c.config = to_json(s).dump();
  c.params = gather_tensors(c.params);
  c.optimizer = gather_tensors(c.optimizer);
  if (world().rank() == 0) io::write_checkpoint(path, m, c);
}

std::vector<uint32_t> lost_stages(const Pipeline& p) {
  std::vector<uint32_t> out;
  for (uint32_t k = 0; k < p.devices.size(); ++k)
    if (p.devices[k] && p.devices[k]->lost()) out.push_back(k);
  return out;
}

namespace {

// A comma list's items without those at `lost` (stage indices); a single item stays (one
// for all).
std::vector<std::string> without(const std::string& list, const std::vector<uint32_t>& lost) {
  std::vector<std::string> items = split_list(list), kept;
  if (items.size() <= 1) return items;
  for (uint32_t i = 0; i < items.size(); ++i)
    if (std::find(lost.begin(), lost.end(), i) == lost.end()) kept.push_back(items[i]);
  return kept;
}

// An interleaved schedule the user fixed needs 2 stages or more and, with --micro-batches
// given, a count of stages that divides it: where the devices that remain allow neither, the
// re-plan runs 1f1b (the same gradients: each micro-batch's are summed alike) rather than
// stopping the run.
void drop_interleaved(PipelineFlags& out, const PipelineFlags& user, const PipelineFlags& run) {
  if (run.schedule != "interleaved" || !(user.given("--schedule") || user.given("--virtual-stages"))) return;
  const size_t remain = out.devices.empty() ? 0 : split_list(out.devices).size();
  for (uint32_t K = 2; K <= remain; ++K)
    if (!user.given("--micro-batches") || run.micro_batches % K == 0) return;
  out.schedule = "1f1b", out.virtual_stages = 1;
  out.fixed["--schedule"] = true, out.fixed["--virtual-stages"] = false;
}

}  // namespace

PipelineFlags replan_flags(const PipelineFlags& user, const PipelineFlags& run, const std::vector<uint32_t>& lost,
                           const AutoPlan* plan) {
  PipelineFlags out = user;
  out.plan = "auto";
  out.fixed["--devices"] = true;
  out.fixed["--balance"] = out.fixed["--partition"] = false;
  // The run's precision stays (it changes the numbers, the plan does not), per stage without
  // the lost ones.
  std::vector<std::string> kept = without(run.precision, lost);
  if (std::all_of(kept.begin(), kept.end(), [&](const std::string& p) { return p == kept.front(); })) kept.resize(1);
  out.precision = join_list(kept);
  out.fixed["--precision"] = true;
  if (plan && kept.size() == 1 && !plan->pool.empty()) {
    // The plan's pool less the entries the lost stages took, each entry with its own cap.
    std::vector<bool> gone(plan->pool.size(), false);
    for (uint32_t k : lost) gone.at(plan->stage_entries.at(k)) = true;
    std::vector<std::string> devices, caps;
    for (size_t i = 0; i < plan->pool.size(); ++i)
      if (!gone[i]) {
        devices.push_back(std::to_string(plan->pool[i].physical));
        if (plan->pool[i].cap) caps.push_back(std::to_string(plan->pool[i].cap));
      }
    out.devices = join_list(devices);
    out.mem_limit = caps.size() == devices.size() ? join_list(caps) : "";  // the caps are all given or none
    drop_interleaved(out, user, run);
    return out;
  }
  out.devices = split_list(run.devices).size() == 1 ? "" : join_list(without(run.devices, lost));  // "": the one device went
  // A cap per stage (given, or a resumed plan's) loses the lost stages' caps.
  if (user.given("--mem-limit") || split_list(run.mem_limit).size() > 1)
    out.mem_limit = join_list(without(run.mem_limit, lost));
  drop_interleaved(out, user, run);
  return out;
}

}  // namespace brigade::cli
