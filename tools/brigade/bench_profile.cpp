// `brigade bench profile`: where a training step's time goes. Two measurements:
//  - GPU time per layer (forward, backward) and per kernel, for one micro-batch with the
//    whole model on the first stage's device, from a timestamp after every dispatch;
//  - whole training steps (AdamW) through the pipeline the flags describe: wall time against
//    each stage's GPU-busy time, and the host's share: submissions, dispatches and barriers
//    per step, and the host time spent recording them.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checks.h"
#include "commands.h"
#include "optim/adamw.h"
#include "pipeline/executor.h"
#include "pipeline/profile.h"
#include "pipeline_flags.h"
#include "table.h"

namespace brigade::cli {
namespace {

struct Options : ModelPipeline {
  int reps = 5;
  bool json = false;
};

std::string ms(double seconds_or_ms, double scale = 1e3) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", seconds_or_ms * scale);
  return b;
}

std::string percent(double part, double whole) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", whole > 0 ? 100 * part / whole : 0.0);
  return b;
}

struct StepProfile {
  double wall_ms = 0;
  std::vector<double> busy_ms;  // per stage, the optimizer step's actions included
  pipeline::TraceSummary trace;  // of the median step
};

StepProfile profile_steps(const model::Model& m, const Options& o, Pipeline& p) {
  pipeline::Executor& ex = *p.executor;
  ex.initialize_parameters(0);
  optim::AdamW adamw(optim::AdamWOptions{});
  ex.attach(adamw);
  const pipeline::Batch batch = pipeline::random_batch(m, o.batch, 1);
  const uint64_t first = warm_up(ex, batch, &adamw, 1e-3);
  std::vector<std::pair<double, pipeline::StepResult>> steps;
  for (int r = 0; r < o.reps; ++r) {
    const double t0 = pipeline::now_us();
    pipeline::StepResult s = ex.train(batch, {&adamw, optim::Step{first + uint64_t(r), 1e-3, 1}, 0});
    steps.push_back({(pipeline::now_us() - t0) / 1e3, std::move(s)});
  }
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const auto& [wall, mid] = steps[steps.size() / 2];
  StepProfile out{wall, std::vector<double>(ex.stages(), 0.0), mid.trace.summary()};
  for (const pipeline::ActionEvent& a : mid.trace.actions)
    out.busy_ms.at(a.stage) += (a.end_us - a.begin_us) / 1e3;
  return out;
}

// The products' GPU time summed by shape (ops::matmul names each one's), the slowest first.
struct ShapeTime {
  std::string work;
  uint32_t dispatches = 0;
  double seconds = 0, flops = 0;
};
std::vector<ShapeTime> by_shape(const std::vector<pipeline::KernelTime>& kernels) {
  std::vector<ShapeTime> out;
  for (const pipeline::KernelTime& k : kernels) {
    if (k.work.empty()) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const ShapeTime& s) { return s.work == k.work; });
    if (it == out.end()) it = out.insert(out.end(), {k.work});
    it->dispatches++, it->seconds += k.seconds, it->flops += k.flops;
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
  return out;
}

void run(const Options& o) {
  const model::Model m = model::build(o.model, o.set);
  PipelineFlags flags = o.pipeline;
  flags.cpu_times = true;  // the host line's CPU time
  Pipeline p = open_pipeline(m, flags, o.batch, 2);
  const uint32_t micro_rows = p.plan.micro_rows.front();
  vk::Device& first = *p.devices.front();
  const ops::Precision precision = p.precision.front();
  const pipeline::LayerProfile lp = pipeline::profile_model(first, m, micro_rows, uint32_t(o.reps), true, precision);
  const StepProfile sp = profile_steps(m, o, p);

  const uint32_t L = uint32_t(m.layers.size());
  double gpu = 0;
  for (uint32_t l = 0; l < L; ++l) gpu += lp.forward[l] + lp.backward[l];
  double loss = 0;
  for (const auto& k : lp.kernels)
    if (k.layer == L) loss += k.seconds;
  gpu += loss;
  // Dispatches, slowest first. A kernel's name carries its specialization after '|'.
  std::vector<pipeline::KernelTime> slowest = lp.kernels;
  std::stable_sort(slowest.begin(), slowest.end(), [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
  auto base_name = [](const std::string& k) { return k.substr(0, k.find('|')); };
  const pipeline::TraceSummary& t = sp.trace;

  if (o.json) {
    nlohmann::json j{{"model", m.name}, {"batch", o.batch}, {"micro_batch_rows", micro_rows},
                     {"device", first.info().name}, {"reps", o.reps}, {"gpu_ms", gpu * 1e3},
                     {"loss_ms", loss * 1e3}};
    for (uint32_t l = 0; l < L; ++l)
      j["layers"].push_back({{"layer", l}, {"kind", m.layers[l]->kind()},
                             {"forward_ms", lp.forward[l] * 1e3}, {"backward_ms", lp.backward[l] * 1e3}});
    for (const auto& k : lp.kernels) {
      nlohmann::json d{{"layer", k.layer}, {"pass", k.pass()}, {"kernel", k.kernel},
                       {"ms", k.seconds * 1e3}};
      if (!k.work.empty()) d["work"] = k.work, d["flops"] = k.flops;
      j["dispatches"].push_back(std::move(d));
    }
    for (const ShapeTime& s : by_shape(lp.kernels))
      j["products"].push_back({{"shape", s.work}, {"dispatches", s.dispatches}, {"ms", s.seconds * 1e3},
                               {"gflops", s.seconds > 0 ? s.flops / s.seconds * 1e-9 : 0.0}});
    j["step"] = {{"stages", t.stages}, {"micro_batches", t.micro_batches}, {"wall_ms", sp.wall_ms},
                 {"busy_ms", sp.busy_ms}, {"submissions", t.submissions}, {"dispatches", t.dispatches},
                 {"barriers", t.barriers}, {"replayed", t.replayed}, {"record_ms", t.record_ms},
                 {"record_cpu_ms", t.record_cpu_ms}};
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("%s on %s: GPU time of one micro-batch of %u rows, forward and backward, median of %d "
              "runs, a timestamp after every dispatch\n",
              m.name.c_str(), first.label().c_str(), micro_rows, o.reps);
  // GFLOPS from the layer's FLOP estimate (backward counted as twice the forward).
  auto gflops = [](double flops, double seconds) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f", seconds > 0 ? flops / seconds * 1e-9 : 0.0);
    return flops > 0 ? std::string(b) : std::string("-");
  };
  std::vector<std::vector<std::string>> layers{
      {"layer", "kind", "forward ms", "GFLOPS", "backward ms", "GFLOPS", "share"}};
  for (uint32_t l = 0; l < L; ++l) {
    const double flops = m.layers[l]->cost().flops * micro_rows;
    layers.push_back({std::to_string(l), m.layers[l]->kind(), ms(lp.forward[l]), gflops(flops, lp.forward[l]),
                      ms(lp.backward[l]), gflops(2 * flops, lp.backward[l]),
                      percent(lp.forward[l] + lp.backward[l], gpu)});
  }
  layers.push_back({"loss", "cross-entropy", "", "", ms(loss), "", percent(loss, gpu)});
  layers.push_back({"all", "", "", "", ms(gpu), "", "100%"});
  print_table(layers);
  const size_t shown = std::min<size_t>(slowest.size(), 12);
  std::printf("\nthe %zu slowest of %zu dispatches (a fill or copy counts with the dispatch after it):\n", shown,
              slowest.size());
  std::vector<std::vector<std::string>> by{{"layer", "pass", "kernel", "ms", "share"}};
  double rest = 0;
  for (size_t i = 0; i < slowest.size(); ++i) {
    const pipeline::KernelTime& k = slowest[i];
    if (i >= shown) {
      rest += k.seconds;
      continue;
    }
    by.push_back({k.layer == L ? "loss" : std::to_string(k.layer) + " " + m.layers[k.layer]->kind(),
                  k.pass(), base_name(k.kernel), ms(k.seconds), percent(k.seconds, gpu)});
  }
  if (rest > 0) by.push_back({"others", "", std::to_string(slowest.size() - shown) + " dispatches", ms(rest), percent(rest, gpu)});
  print_table(by);

  // The same time summed by kernel (whatever its specialization and layer).
  std::vector<std::pair<std::string, std::pair<uint32_t, double>>> by_kernel;
  for (const pipeline::KernelTime& k : lp.kernels) {
    const std::string name = base_name(k.kernel);
    auto it = std::find_if(by_kernel.begin(), by_kernel.end(), [&](const auto& e) { return e.first == name; });
    if (it == by_kernel.end()) it = by_kernel.insert(by_kernel.end(), {name, {0, 0.0}});
    it->second.first++, it->second.second += k.seconds;
  }
  std::stable_sort(by_kernel.begin(), by_kernel.end(),
                   [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  std::printf("\nby kernel:\n");
  std::vector<std::vector<std::string>> kt{{"kernel", "dispatches", "ms", "share"}};
  for (const auto& [name, n_s] : by_kernel)
    kt.push_back({name, std::to_string(n_s.first), ms(n_s.second), percent(n_s.second, gpu)});
  print_table(kt);

  // The products again, by shape: M x N x K of op(A) op(B), A^T or B^T where stored transposed,
  // xP for P products in one dispatch (causal: FLOPs counted as if whole).
  std::printf("\nproducts by shape (M x N x K):\n");
  std::vector<std::vector<std::string>> ps{{"product", "dispatches", "ms", "GFLOPS", "share"}};
  for (const ShapeTime& s : by_shape(lp.kernels))
    ps.push_back({s.work, std::to_string(s.dispatches), ms(s.seconds), gflops(s.flops, s.seconds), percent(s.seconds, gpu)});
  print_table(ps);

  std::printf("\ntraining step (AdamW) on %u stage(s), %u micro-batch(es) of up to %u rows, median of %d "
              "after warm-up: %.2f ms wall\n",
              t.stages, t.micro_batches, micro_rows, o.reps, sp.wall_ms);
  std::vector<std::vector<std::string>> stages{{"stage", "GPU busy ms", "of wall", "not busy ms"}};
  for (uint32_t k = 0; k < sp.busy_ms.size(); ++k)
    stages.push_back({std::to_string(k), ms(sp.busy_ms[k], 1), percent(sp.busy_ms[k], sp.wall_ms),
                      ms(sp.wall_ms - sp.busy_ms[k], 1)});
  print_table(stages);
  std::printf("host: %u submissions (%u replayed), %u dispatches, %u barriers per step; recording took %.2f ms, "
              "%.2f ms of CPU time (%.1f us per dispatch, %.2f ms per micro-batch)\n",
              t.submissions, t.replayed, t.dispatches, t.barriers, t.record_ms, t.record_cpu_ms,
              t.dispatches ? t.record_ms * 1e3 / t.dispatches : 0.0, t.record_ms / std::max(1u, t.micro_batches));
}

}  // namespace

void add_bench_profile(CLI::App& bench) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = bench.add_subcommand(
      "profile", "Where a training step's time goes: GPU time per layer and kernel, and the host's share of a step");
  add_model_pipeline_flags(*cmd, *o);
  cmd->add_option("--reps", o->reps, "timed runs of each measurement (the median is reported)")
      ->capture_default_str()
      ->check(kPositive);
  cmd->add_flag("--json", o->json, "print JSON instead of tables");
  cmd->callback([o] { run(*o); });
}

}  // namespace brigade::cli
