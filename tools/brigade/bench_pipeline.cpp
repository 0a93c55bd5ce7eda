// `brigade bench pipeline`: what the pipeline machinery costs, and GPipe's bubble, measured.
// For each K of --stages (K logical devices of one physical device) and each M of
// --micro-batches: warm-up training steps (SGD; cli::warm_up) on a fixed random mini-batch, then --reps
// timed steps. Reported per (K, M): the median step time and samples per second, the
// throughput relative to K=1 at the same M, the bubble measured from the trace's GPU
// timestamps against GPipe's (K-1)/(M+K-1), and the largest stage's peak activation and
// total memory.
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

struct Options {
  std::string model = "fashion-cnn";
  uint32_t batch = 64;
  std::vector<uint32_t> stages{1, 2, 4};
  std::vector<uint32_t> micro_batches{1, 4};
  std::string remat = "always";
  std::string precision = "fp32";
  std::string device = "0";
  int reps = 5;
  bool json = false;
  std::string svg;  // folder for bubble.svg
};

struct Row {
  uint32_t K = 0, M = 0;
  double step_ms = 0, samples_per_s = 0, relative = 0, bubble = 0, predicted = 0;
  uint64_t activations = 0, total = 0;  // the largest stage's peaks
};

Row measure(const model::Model& m, const Options& o, const pipeline::Batch& batch, uint32_t K, uint32_t M) {
  PipelineFlags f;
  f.devices = logical_devices(o.device, K);
  f.micro_batches = M;
  f.remat = o.remat;
  f.precision = o.precision;
  Pipeline p = open_pipeline(m, f, o.batch, 1);
  pipeline::Executor& ex = *p.executor;
  ex.initialize_parameters(0);
  optim::Sgd sgd(optim::SgdOptions{.momentum = 0.9});
  ex.attach(sgd);
  const uint64_t first = warm_up(ex, batch, &sgd, 0.01);
  std::vector<double> ms, bubble;
  double predicted = 0;
  for (int r = 0; r < o.reps; ++r) {
    const double t0 = pipeline::now_us();
    const pipeline::StepResult s = ex.train(batch, {&sgd, optim::Step{first + uint64_t(r), 0.01, 1}, 0});
    ms.push_back((pipeline::now_us() - t0) / 1e3);
    const pipeline::TraceSummary t = s.trace.summary();
    bubble.push_back(t.bubble);
    predicted = t.predicted_bubble;
  }
  Row row{K, M, median(ms), 0, 0, median(bubble), predicted, 0, 0};
  row.samples_per_s = o.batch / (row.step_ms / 1e3);
  for (auto& d : p.devices) {
    const vk::MemoryStats st = d->memory().stats();
    row.activations = std::max(row.activations, st.peak[int(vk::Category::Activations)]);
    row.total = std::max(row.total, st.total_peak);
  }
  return row;
}

void run(const Options& o) {
  // Every entry of the lists checked before the first is timed.
  check_micro_batch_list(o.micro_batches, o.batch);
  if (!o.svg.empty() && std::none_of(o.stages.begin(), o.stages.end(), [](uint32_t K) { return K > 1; }))
    throw UserError("--svg: bubble.svg charts the bubble of K > 1 stages, and --stages has none; add a K above 1 "
                    "to --stages or leave out --svg");
  if (!o.svg.empty()) prepare_chart_folder(o.svg, {"bubble.svg"});
  const model::Model m = model::build(o.model);
  const pipeline::Batch batch = pipeline::random_batch(m, o.batch, 1);
  std::vector<Row> rows;
  for (uint32_t M : o.micro_batches)
    for (uint32_t K : o.stages) {
      rows.push_back(measure(m, o, batch, K, M));
      if (!o.json)
        std::fprintf(stderr, "K=%u M=%u: %.1f ms per step\n", K, M, rows.back().step_ms);
    }
  // Against K=1 at the same M, wherever in --stages it came; without it there is nothing to compare with.
  for (Row& r : rows) {
    r.relative = NAN;
    for (const Row& one : rows)
      if (one.K == 1 && one.M == r.M) r.relative = r.samples_per_s / one.samples_per_s;
  }
  if (o.json) {
    nlohmann::json j{{"model", o.model}, {"batch", o.batch}, {"remat", o.remat}, {"reps", o.reps}};
    for (const Row& r : rows)
      j["results"].push_back({{"stages", r.K}, {"micro_batches", r.M}, {"step_ms", r.step_ms},
                              {"samples_per_s", r.samples_per_s},
                              {"relative_to_one_stage", std::isfinite(r.relative) ? nlohmann::json(r.relative) : nlohmann::json()},
                              {"bubble", r.bubble}, {"gpipe_bubble", r.predicted},
                              {"peak_activation_bytes", r.activations}, {"peak_bytes", r.total}});
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::vector<std::vector<std::string>> t{{"K", "M", "ms/step", "samples/s", "vs K=1", "bubble",
                                             "(K-1)/(M+K-1)", "activations", "peak"}};
    char buf[5][32];
    for (const Row& r : rows) {
      std::snprintf(buf[0], 32, "%.1f", r.step_ms);
      std::snprintf(buf[1], 32, "%.0f", r.samples_per_s);
      std::snprintf(buf[2], 32, std::isfinite(r.relative) ? "%.3f" : "-", r.relative);
      std::snprintf(buf[3], 32, "%.3f", r.bubble);
      std::snprintf(buf[4], 32, "%.3f", r.predicted);
      t.push_back({std::to_string(r.K), std::to_string(r.M), buf[0], buf[1], buf[2], buf[3], buf[4],
                   format_bytes(r.activations), format_bytes(r.total)});
    }
    std::printf("%s, batch %u, remat %s, median of %d steps after warm-up\n", o.model.c_str(), o.batch,
                o.remat.c_str(), o.reps);
    print_table(t);
  }
  if (!o.svg.empty()) {
    io::Chart c{"GPipe's bubble: measured against (K-1)/(M+K-1)", "micro-batches M", "bubble fraction", {}, false};
    for (uint32_t K : o.stages) {
      if (K == 1) continue;
      io::Series measured{"K=" + std::to_string(K) + " measured", {}, {}, false, true, int(K)};
      io::Series theory{"K=" + std::to_string(K) + " (K-1)/(M+K-1)", {}, {}, true, false, int(K)};
      for (const Row& r : rows)
        if (r.K == K) {
          measured.x.push_back(r.M), measured.y.push_back(r.bubble);
          theory.x.push_back(r.M), theory.y.push_back(r.predicted);
        }
      c.series.push_back(measured), c.series.push_back(theory);
    }
    const std::string path = o.svg + "/bubble.svg";
    io::write_atomically(path, io::render_svg(c));
    std::fprintf(stderr, "wrote %s\n", path.c_str());
  }
}

}  // namespace

void add_bench_pipeline(CLI::App& bench) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = bench.add_subcommand(
      "pipeline", "Pipeline overhead and GPipe's bubble: training steps on K logical devices of one device");
  cmd->add_option("--model", o->model, "preset name or a model .toml file")->capture_default_str();
  cmd->add_option("--batch-size,-b", o->batch, "samples per mini-batch")->capture_default_str()->check(kPositive);
  cmd->add_option("--stages", o->stages, "numbers of stages K to measure")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1u, 64u));
  cmd->add_option("--micro-batches,-m", o->micro_batches, "numbers of micro-batches M to measure")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--remat", o->remat, "re-materialization: never, always or except-last")->capture_default_str();
  cmd->add_option("--precision", o->precision, "how stages store activations: fp32, bf16, fp16 or auto")->capture_default_str();
  cmd->add_option("--device", o->device, "device from `brigade devices`: index, part of its name or a UUID prefix")->capture_default_str();
  cmd->add_option("--reps", o->reps, "timed steps per case (the median is reported)")
      ->capture_default_str()
      ->check(kPositive);
  cmd->add_flag("--json", o->json, "print JSON instead of a table");
  cmd->add_option("--svg", o->svg, "folder to write bubble.svg into");
  cmd->callback([o] { run(*o); });
}

}  // namespace brigade::cli
