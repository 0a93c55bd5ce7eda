// `brigade bench schedules`: the schedules side by side on K logical devices of one device.
// For each M of --micro-batches, every schedule of --schedules is opened as its own pipeline
// (its own logical devices, so each has its own memory peaks); then --reps rounds each run one
// training step (SGD) of every schedule, the order turning each round. Reported per (M,
// schedule): each stage's peak activation memory measured against the plan, the median step
// time, and the bubble measured from the trace's GPU timestamps against the schedule's theory
// (equal cells) and its prediction on the planned cell times.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checks.h"
#include "commands.h"
#include "io/safetensors.h"
#include "io/svg.h"
#include "optim/sgd.h"
#include "pipeline/executor.h"
#include "pipeline_flags.h"
#include "table.h"
#include "util/stats.h"
#include "util/error.h"
#include "util/units.h"

namespace brigade::cli {
namespace {

struct SchedulesOptions {
  std::string model = "fashion-cnn";
  uint32_t batch = 64;
  uint32_t stages = 4;
  std::vector<uint32_t> micro_batches{4, 8, 16};
  std::vector<std::string> schedules{"gpipe", "1f1b", "interleaved", "zb"};
  uint32_t virtual_stages = 2;
  std::string remat = "never";
  std::string precision = "fp32";
  std::string device = "0";
  int reps = 5;
  bool json = false;
  std::string svg;  // folder for schedule-memory.svg and schedule-bubble.svg
};

struct SchedulesRow {
  uint32_t M = 0;
  std::string schedule;
  std::vector<double> ms, bubble;
  double theory = 0, planned_bubble = 0;
  std::vector<uint64_t> planned, measured;  // per stage: activation bytes
};

struct Open {
  SchedulesRow row;
  Pipeline p;
  std::unique_ptr<optim::Sgd> sgd;
  uint64_t first = 1;  // the first step to time (warm_up)
};

void run_schedules(const SchedulesOptions& o) {
  // Every entry of the lists checked before the first is timed.
  check_micro_batch_list(o.micro_batches, o.batch);
  if (o.schedules.empty()) throw UserError("--schedules: give at least one of gpipe, 1f1b, interleaved and zb");
  for (const std::string& schedule : o.schedules)
    if (schedule != "gpipe" && schedule != "1f1b" && schedule != "interleaved" && schedule != "zb")
      throw UserError("--schedules: '" + schedule + "' is not a schedule; expected gpipe, 1f1b, interleaved or zb");
  // interleaved runs only where K divides M: a run with nothing else would measure nothing.
  const bool any = std::any_of(o.schedules.begin(), o.schedules.end(), [&](const std::string& s) {
    return s != "interleaved" ||
           std::any_of(o.micro_batches.begin(), o.micro_batches.end(), [&](uint32_t M) { return M % o.stages == 0; });
  });
  if (!any)
    throw UserError("--schedules interleaved: it runs only where M is a multiple of --stages " +
                    std::to_string(o.stages) + ", and no M of --micro-batches is; give such an M or another schedule");
  if (!o.svg.empty()) prepare_chart_folder(o.svg, {"schedule-memory.svg", "schedule-bubble.svg"});
  const model::Model m = model::build(o.model);
  const pipeline::Batch batch = pipeline::random_batch(m, o.batch, 1);
  std::vector<SchedulesRow> rows;
  for (uint32_t M : o.micro_batches) {
    std::vector<std::unique_ptr<Open>> open;
    for (const std::string& schedule : o.schedules) {
      if (schedule == "interleaved" && M % o.stages) {
        if (!o.json) std::fprintf(stderr, "M=%u: interleaved left out (M is not a multiple of K=%u)\n", M, o.stages);
        continue;
      }
      PipelineFlags f;
      f.devices = logical_devices(o.device, o.stages);
      f.micro_batches = M;
      f.schedule = schedule;
      f.virtual_stages = schedule == "interleaved" ? o.virtual_stages : 1;
      f.remat = o.remat;
      f.precision = o.precision;
      auto x = std::make_unique<Open>();
      x->p = open_pipeline(m, f, o.batch, 1);
      x->row.M = M, x->row.schedule = schedule == "interleaved" ? "interleaved V=" + std::to_string(o.virtual_stages) : schedule;
      x->row.planned_bubble = x->p.plan.bubble;
      for (uint32_t k = 0; k < o.stages; ++k)
        x->row.planned.push_back(x->p.plan.stage_memory(k, 1)[int(vk::Category::Activations)]);
      pipeline::Executor& ex = *x->p.executor;
      ex.initialize_parameters(0);
      x->sgd = std::make_unique<optim::Sgd>(optim::SgdOptions{.momentum = 0.9});
      ex.attach(*x->sgd);
      x->first = warm_up(ex, batch, x->sgd.get(), 0.01);
      open.push_back(std::move(x));
    }
    for (int r = 0; r < o.reps; ++r)
      for (size_t j = 0; j < open.size(); ++j) {
        Open& x = *open[(j + size_t(r)) % open.size()];  // each round starts one schedule later
        const double t0 = pipeline::now_us();
        const pipeline::StepResult s = x.p.executor->train(batch, {x.sgd.get(), optim::Step{x.first + uint64_t(r), 0.01, 1}, 0});
        x.row.ms.push_back((pipeline::now_us() - t0) / 1e3);
        const pipeline::TraceSummary t = s.trace.summary();
        x.row.bubble.push_back(t.bubble);
        x.row.theory = t.predicted_bubble;
      }
    for (auto& x : open) {
      for (auto& d : x->p.devices) x->row.measured.push_back(d->memory().stats().peak[int(vk::Category::Activations)]);
      if (!o.json) std::fprintf(stderr, "M=%u %s: %.1f ms per step\n", M, x->row.schedule.c_str(), median(x->row.ms));
      rows.push_back(std::move(x->row));
    }
  }
  auto stages_text = [](const std::vector<uint64_t>& v) {
    std::string s;
    for (uint64_t b : v) s += (s.empty() ? "" : " ") + format_bytes(b);
    return s;
  };
  if (o.json) {
    nlohmann::json j{{"model", o.model}, {"batch", o.batch}, {"stages", o.stages}, {"remat", o.remat}, {"reps", o.reps}};
    for (const SchedulesRow& r : rows)
      j["results"].push_back({{"micro_batches", r.M}, {"schedule", r.schedule}, {"step_ms", median(r.ms)},
                              {"step_ms_min", *std::min_element(r.ms.begin(), r.ms.end())},
                              {"step_ms_max", *std::max_element(r.ms.begin(), r.ms.end())},
                              {"bubble", median(r.bubble)}, {"bubble_theory", r.theory},
                              {"bubble_planned", r.planned_bubble}, {"planned_activation_bytes", r.planned},
                              {"measured_activation_bytes", r.measured}});
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s, batch %u, K=%u, remat %s; median of %d steps per schedule after warm-up, schedules alternated\n",
                o.model.c_str(), o.batch, o.stages, o.remat.c_str(), o.reps);
    std::vector<std::vector<std::string>> t{{"M", "schedule", "ms/step (min-max)", "bubble", "theory", "planned",
                                             "activations per stage, measured", "= plan", "peak stage"}};
    for (const SchedulesRow& r : rows)
      t.push_back({std::to_string(r.M), r.schedule,
                   fixed(median(r.ms), 1) + " (" + fixed(*std::min_element(r.ms.begin(), r.ms.end()), 1) + "-" +
                       fixed(*std::max_element(r.ms.begin(), r.ms.end()), 1) + ")",
                   fixed(median(r.bubble), 3), fixed(r.theory, 3), fixed(r.planned_bubble, 3), stages_text(r.measured),
                   r.measured == r.planned ? "yes" : "NO",
                   format_bytes(*std::max_element(r.measured.begin(), r.measured.end()))});
    print_table(t);
  }
  if (!o.svg.empty()) {
    io::Chart mem{"peak activation memory of the fullest stage, K=" + std::to_string(o.stages), "micro-batches M",
                  "bytes", {}, false};
    io::Chart bub{"bubble, measured (solid) against theory (dashed), K=" + std::to_string(o.stages), "micro-batches M",
                  "bubble fraction", {}, false};
    int colour = 0;
    for (const std::string& name : o.schedules) {
      io::Series peak{name, {}, {}, false, true, colour}, measured{name, {}, {}, false, true, colour},
          theory{name + " theory", {}, {}, true, false, colour};
      for (const SchedulesRow& r : rows)
        if (r.schedule.rfind(name, 0) == 0) {
          peak.x.push_back(r.M), peak.y.push_back(double(*std::max_element(r.measured.begin(), r.measured.end())));
          measured.x.push_back(r.M), measured.y.push_back(median(r.bubble));
          theory.x.push_back(r.M), theory.y.push_back(r.theory);
        }
      mem.series.push_back(peak), bub.series.push_back(measured), bub.series.push_back(theory);
      ++colour;
    }
    io::write_atomically(o.svg + "/schedule-memory.svg", io::render_svg(mem));
    io::write_atomically(o.svg + "/schedule-bubble.svg", io::render_svg(bub));
    if (!o.json) std::fprintf(stderr, "wrote %s/schedule-memory.svg and schedule-bubble.svg\n", o.svg.c_str());
  }
}

}  // namespace

void add_bench_schedules(CLI::App& bench) {
  auto o = std::make_shared<SchedulesOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "schedules", "The pipeline schedules side by side: memory per stage against the plan, step time and bubble");
  cmd->add_option("--model", o->model, "preset name or a model .toml file")->capture_default_str();
  cmd->add_option("--batch-size,-b", o->batch, "samples per mini-batch")->capture_default_str()->check(kPositive);
  cmd->add_option("--stages", o->stages, "stages K (logical devices of --device)")->capture_default_str()->check(CLI::Range(1u, 64u));
  cmd->add_option("--micro-batches,-m", o->micro_batches, "numbers of micro-batches M to measure")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--schedules", o->schedules, "schedules to compare: gpipe, 1f1b, interleaved, zb")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--virtual-stages", o->virtual_stages, "cells per stage of the interleaved schedule")
      ->capture_default_str()
      ->check(CLI::Range(2u, 64u));
  cmd->add_option("--remat", o->remat, "re-materialization: never, always or except-last")->capture_default_str();
  cmd->add_option("--precision", o->precision, "how stages store activations: fp32, bf16, fp16 or auto")->capture_default_str();
  cmd->add_option("--device", o->device, "device from `brigade devices`: index, part of its name or a UUID prefix")->capture_default_str();
  cmd->add_option("--reps", o->reps, "timed steps per schedule and M (the median is reported)")
      ->capture_default_str()
      ->check(kPositive);
  cmd->add_flag("--json", o->json, "print JSON instead of a table");
  cmd->add_option("--svg", o->svg, "folder to write schedule-memory.svg and schedule-bubble.svg into");
  cmd->callback([o] { run_schedules(*o); });
}

}  // namespace brigade::cli
