// `brigade plan`: the partition, each stage's predicted memory by category against its cap,
// the schedule's action lists and its bubble, without training anything.
#include <cstdio>
#include <map>
#include <string>

#include "auto_plan.h"
#include "commands.h"
#include "engine_words.h"
#include "optim/loss_scale.h"
#include "optim/sgd.h"
#include "pipeline_flags.h"
#include "table.h"
#include "util/units.h"
#include "util/error.h"

namespace brigade::cli {
namespace {

struct PlanArgs {
  std::string model, optimizer = "adamw";
  std::vector<std::string> set;
  uint32_t batch_size = 64;
  double momentum = 0;  // SGD's, as `train` takes it
  bool forward_only = false;  // as eval and sample plan
  PipelineFlags pipeline;
};

// The copies of the parameters the optimizer keeps, as `train` allocates them.
uint32_t optimizer_states(const std::string& name, double momentum) {
  if (name == "adamw") return 2;
  if (name == "sgd") return momentum > 0 ? 1 : 0;  // the momentum buffer
  if (name == "none") return 0;
  throw UserError("--optimizer: '" + name + "' is not an optimizer; expected adamw, sgd or none");
}

std::string layer_range(const model::Model& m, uint32_t first, uint32_t last) {
  std::string s = std::to_string(first) + "-" + std::to_string(last - 1) + " ";
  s += m.layers[first]->kind();
  if (last - first > 1) s += ".." + m.layers[last - 1]->kind();
  return s;
}

int run_plan(const PlanArgs& a) {
  if (a.optimizer == "sgd") optim::validate(optim::SgdOptions{.momentum = a.momentum});
  const model::Model m = model::build(a.model, a.set);
  PipelineFlags f = a.pipeline;
  if (a.forward_only) {
    if (f.given("--remat")) throw UserError("--remat: forward passes recompute nothing; drop it with --forward-only");
    f.use = PipelineUse::Evaluation;
  }
  if (f.plan == "auto") {  // the search's best configurations, then the chosen one's plan in full
    const AutoPlan chosen = auto_plan(m, f, a.batch_size, optimizer_states(a.optimizer, a.momentum));
    print_table(chosen.table);
    std::printf("%s\n%s\nsame as: %s\n\n", chosen.profiled.c_str(), chosen.line.c_str(), chosen.same_as.c_str());
    f = chosen.flags;
  }
  Devices d = open_devices(f);
  const std::string links = link_lines(choose_links(f, d, pipeline::parse_link(f.link)), d);
  const pipeline::Plan p = make_plan(m, f, d, a.batch_size, optimizer_states(a.optimizer, a.momentum));
  const uint32_t K = p.schedule.stages, C = p.schedule.cells();
  const uint32_t states = optimizer_states(a.optimizer, a.momentum);
  std::printf("%s: %zu layers, %llu parameters; mini-batch %u as %zu micro-batches of up to %u, "
              "schedule %s, %s, partition by %s\n",
              m.name.c_str(), m.layers.size(), (unsigned long long)m.parameter_count(), a.batch_size,
              p.micro_rows.size(), p.micro_rows.front(), f.schedule.c_str(),
              a.forward_only ? "forward passes only" : ("remat " + f.remat).c_str(),
              f.balance.empty() ? f.partition.c_str() : "hand (--balance)");
  const bool profiled = f.partition == "profile" && f.balance.empty();
  // With virtual stages a row per cell, then a row per stage with its cells' sum.
  std::vector<std::vector<std::string>> rows{{C > K ? "cell" : "stage", "device", "layers", "precision",
                                              profiled ? "ms/micro-batch" : "GFLOP", "params", "grads",
                                              "optimizer", "activations", "links", "scratch", "total", "cap", "fits"}};
  const std::vector<ops::Precision> precision = stage_precisions(f.precision, d.stages);
  // A stage fits under its cap, if any, and where its device's memory holds every stage on it.
  std::map<std::string, uint64_t> on_device;
  const auto device_key = [&](uint32_t k) { return d.stages[k].rank + "/" + std::to_string(d.stages[k].index); };
  for (uint32_t k = 0; k < K; ++k) on_device[device_key(k)] += pipeline::total(p.stage_memory(k, states));
  const auto fits = [&](uint32_t k, uint64_t total, uint64_t cap) {
    if ((cap && total > cap) || !p.over_limits[k].empty()) return false;
    return !d.stages[k].heap || on_device[device_key(k)] <= d.stages[k].heap;
  };
  auto row = [&](const std::string& name, uint32_t k, const std::string& layers, const std::string& work,
                 const pipeline::Bytes& b, bool with_cap) {
    const uint64_t total = pipeline::total(b), cap = with_cap ? d.caps[k] : 0;
    auto bytes = [&](vk::Category c) { return format_bytes(b[int(c)]); };
    rows.push_back({name, std::to_string(d.devices[k]->info().index) + " " + d.devices[k]->info().name, layers,
                    ops::precision_name(precision[k]), work,
                    bytes(vk::Category::Parameters), bytes(vk::Category::Gradients), bytes(vk::Category::Optimizer),
                    bytes(vk::Category::Activations), bytes(vk::Category::Transfer), bytes(vk::Category::Scratch),
                    format_bytes(total), cap ? format_bytes(cap) : "-",
                    !with_cap ? "" : fits(k, total, cap) ? "yes" : "NO"});
  };
  for (uint32_t c = 0; c < C; ++c) {
    const pipeline::CellLayout& l = p.cells[c];
    char work[32];
    // Cost: forward + backward FLOPs of the mini-batch; profile: measured time per micro-batch.
    std::snprintf(work, sizeof work, "%.2f",
                  profiled ? p.partition.stage_time[c] * 1e3 : p.partition.stage_time[c] * a.batch_size * 1e-9);
    const std::string name = C > K ? std::to_string(c) + " (stage " + std::to_string(c % K) + ")" : std::to_string(c);
    row(name, c % K, layer_range(m, l.first, l.last), work, l.memory(states), C == K);
  }
  if (C > K)
    for (uint32_t k = 0; k < K; ++k) row("stage " + std::to_string(k), k, "", "", p.stage_memory(k, states), true);
  print_table(rows);
  // Which kernel each stage's matrix products run on, and why; auto's choice said where taken.
  const bool automatic = f.precision.find("auto") != std::string::npos;
  for (uint32_t k = 0; k < K; ++k)
    std::printf("stage %u: %s%s\n", k, d.stages[k].products[size_t(precision[k])].c_str(),
                automatic ? (std::string("; auto: ") + kAutoPrecision[size_t(d.stages[k].multiplies)]).c_str() : "");
  // Which kernels attention takes where GPT blocks are: in 16 bits where the blocks store them.
  for (uint32_t c = 0; c < C; ++c) {
    const pipeline::CellLayout& l = p.cells[c];
    for (uint32_t j = l.first; j < l.last; ++j) {
      if (m.layers[j]->kind() != "gpt_attention") continue;
      const bool half = j - l.first < l.direct.size() && l.direct[j - l.first];
      const std::string name = (C > K ? "cell " : "stage ") + std::to_string(c);
      std::printf("%s attention: %s\n", name.c_str(),
                  d.stages[c % K].attention[size_t(half ? precision[c % K] : ops::Precision::Fp32)].c_str());
      break;
    }
  }
  // Where 16-bit tensors are: which layers' kernels take them, which run on fp32 copies.
  for (uint32_t c = 0; c < C; ++c) {
    const pipeline::CellLayout& l = p.cells[c];
    std::string own, copied;
    for (uint32_t j = 0; j < l.direct.size(); ++j) {
      std::string& list = l.direct[j] ? own : copied;
      if (l.direct[j] || l.converted[j]) list += (list.empty() ? "" : ", ") + std::to_string(l.first + j) + " " + m.layers[l.first + j]->kind();
    }
    if (own.empty() && copied.empty()) continue;
    std::printf("%s %s: 16-bit tensors taken by %s; on fp32 copies: %s; fp32 work %s\n",
                C > K ? ("cell " + std::to_string(c)).c_str() : ("stage " + std::to_string(c)).c_str(),
                ops::precision_name(precision[c % K]), own.empty() ? "none" : own.c_str(),
                copied.empty() ? "none" : copied.c_str(), format_bytes(l.work_bytes).c_str());
  }
  if (!a.forward_only && scales_loss(precision))
    std::printf("fp16 stages train with dynamic loss scaling from %.0f (halved when a step's gradients overflow, "
                "which skips the step; doubled after %llu good steps)\n",
                optim::LossScale::kInitial, (unsigned long long)optim::LossScale::kInterval);
  std::printf("%s%s", links.c_str(), pipeline::compute_string(p.schedule).c_str());
  std::printf("bubble of %s: %.3f with equal cells, %.3f on the planned cell times (imbalance included)\n",
              f.schedule.c_str(), p.even_bubble, p.bubble);
  if (!p.problem.empty()) {
    std::fprintf(stderr, "brigade: %s\n", in_flags(p.problem).c_str());
    return 1;
  }
  return 0;
}

}  // namespace

void add_plan(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "show the partition and each device's predicted memory, without training");
  add_model_flags(*cmd, a->model, a->set, a->batch_size)->required();
  cmd->add_option("--optimizer", a->optimizer, "optimizer whose state to count: adamw, sgd or none")
      ->capture_default_str();
  cmd->add_option("--momentum", a->momentum, "SGD momentum, as for train (0: no momentum buffer)")
      ->capture_default_str();
  cmd->add_flag("--forward-only", a->forward_only,
                "plan forward passes only, as eval runs them (its batch as --batch-size) and sample does "
                "(--batch-size 1): no gradients, optimizer state or backward, one micro-batch's activations");
  add_pipeline_flags(*cmd, a->pipeline);
  cmd->callback([a] {
    if (const int rc = run_plan(*a)) throw CLI::RuntimeError(rc);
  });
}

}  // namespace brigade::cli
