// `brigade bench partition`: on devices of unequal speed (two vendors' drivers, a GPU and a
// CPU), the partition by estimated cost (FLOPs) against the partition by each layer's time
// measured on each stage's own device (--partition profile). Both pipelines are opened once;
// then --rounds rounds, alternating the two, each timing --steps SGD training steps after its
// warm-up (cli::warm_up). Reported per partition: the layers and the planned time of each stage (the
// profiled layer times of its device, summed over its layers, times M) next to the busy time
// the trace measured, the median step time and its spread, and the ratio of the two.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "optim/sgd.h"
#include "pipeline/executor.h"
#include "pipeline/profile.h"
#include "pipeline_flags.h"
#include "table.h"
#include "util/stats.h"
#include "util/error.h"

namespace brigade::cli {
namespace {

struct PartitionOptions : ModelPipeline {
  int rounds = 5;
  int steps = 3;
};

struct Side {
  std::string name;
  Pipeline p;
  std::unique_ptr<optim::Sgd> sgd;
  std::vector<double> planned_ms;      // per stage and step
  std::vector<double> step_ms;         // per round: the median of its steps
  std::vector<std::vector<double>> busy_ms;  // per round, per stage: the last step's busy time
  uint64_t t = 1;
};

void run(const PartitionOptions& o) {
  if (o.pipeline.virtual_stages > 1)
    throw UserError("bench partition compares cuts of one cell per stage; leave out --virtual-stages");
  if (o.pipeline.plan == "auto")
    throw UserError("--plan auto: bench partition compares the cut by cost with the cut by profile of one pipeline "
                    "the flags give; leave out --plan auto and give --devices and --micro-batches");
  if (o.rounds < 1 || o.steps < 1) throw UserError("--rounds and --steps must be at least 1");
  const model::Model m = model::build(o.model, o.set);
  const pipeline::Batch batch = pipeline::random_batch(m, o.batch, 1);
  std::vector<Side> sides;
  for (const char* partition : {"cost", "profile"}) {
    PipelineFlags f = o.pipeline;
    f.partition = partition;
    f.balance.clear();
    Side s{partition, open_pipeline(m, f, o.batch, 1), nullptr, {}, {}, {}};
    s.sgd = std::make_unique<optim::Sgd>(optim::SgdOptions{.momentum = 0.9});
    s.p.executor->initialize_parameters(0);
    s.p.executor->attach(*s.sgd);
    sides.push_back(std::move(s));
  }
  // The plans' time per stage from one profile of each physical device: layer times at the
  // micro-batch size, summed over each stage's layers, M micro-batches per step.
  const uint32_t micro_rows = pipeline::split_rows(o.batch, o.pipeline.micro_batches).front();
  // (physical device, the stage's precision) -> seconds per layer
  const std::vector<ops::Precision> precision = sides[0].p.precision;
  std::map<std::pair<uint32_t, ops::Precision>, std::vector<double>> layer_s;
  for (size_t k = 0; k < sides[0].p.devices.size(); ++k) {
    vk::Device& dev = *sides[0].p.devices[k];
    const auto key = std::pair(dev.info().index, precision[k]);
    if (!layer_s.count(key)) layer_s[key] = pipeline::profile_layers(dev, m, micro_rows, key.second);
  }
  for (Side& s : sides)
    for (size_t k = 0; k < s.p.plan.cells.size(); ++k) {
      const pipeline::CellLayout& l = s.p.plan.cells[k];
      const std::vector<double>& t = layer_s.at({s.p.devices[k]->info().index, precision[k]});
      double sum = 0;
      for (uint32_t i = l.first; i < l.last; ++i) sum += t[i];
      s.planned_ms.push_back(sum * 1e3 * o.pipeline.micro_batches);
    }

  auto step = [&](Side& s) {
    return s.p.executor->train(batch, {s.sgd.get(), optim::Step{s.t++, 0.01, 1}, 0});
  };
  for (Side& s : sides) s.t = warm_up(*s.p.executor, batch, s.sgd.get(), 0.01);
  for (int r = 0; r < o.rounds; ++r)
    for (Side& s : sides) {
      std::vector<double> ms;
      pipeline::StepResult last;
      for (int i = 0; i < o.steps; ++i) {
        const double t0 = pipeline::now_us();
        last = step(s);
        ms.push_back((pipeline::now_us() - t0) / 1e3);
      }
      s.step_ms.push_back(median(ms));
      s.busy_ms.push_back(last.trace.summary().busy_ms);
      std::fprintf(stderr, "round %d, %s: %.1f ms per step\n", r + 1, s.name.c_str(), s.step_ms.back());
    }

  std::printf("%s, batch %u as %u micro-batches, remat %s; %d alternated rounds of %d steps after warm-up\n",
              m.name.c_str(), o.batch, o.pipeline.micro_batches, o.pipeline.remat.c_str(), o.rounds, o.steps);
  std::vector<std::vector<std::string>> t{{"partition", "stage", "device", "layers", "planned ms", "measured busy ms"}};
  for (const Side& s : sides)
    for (size_t k = 0; k < s.planned_ms.size(); ++k) {
      std::vector<double> busy;
      for (const auto& round : s.busy_ms) busy.push_back(round.at(k));
      const pipeline::CellLayout& l = s.p.plan.cells[k];
      t.push_back({s.name, std::to_string(k), std::to_string(s.p.devices[k]->info().index) + " " + s.p.devices[k]->info().name,
                   std::to_string(l.first) + "-" + std::to_string(l.last - 1), fixed(s.planned_ms[k], 1),
                   fixed(median(busy), 1)});
    }
  print_table(t);
  std::vector<double> ratios;
  for (int r = 0; r < o.rounds; ++r) ratios.push_back(sides[0].step_ms[r] / sides[1].step_ms[r]);
  for (const Side& s : sides) {
    const auto [lo, hi] = std::minmax_element(s.step_ms.begin(), s.step_ms.end());
    std::printf("%-8s %.1f ms per step (median; rounds %.1f-%.1f)\n", s.name.c_str(), median(s.step_ms), *lo, *hi);
  }
  const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
  std::printf("cost / profile step time: %.2fx (median of rounds; %.2f-%.2f)\n", median(ratios), *lo, *hi);
}

}  // namespace

void add_bench_partition(CLI::App& bench) {
  auto o = std::make_shared<PartitionOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "partition", "Partition by cost against by profile on unequal devices: planned and measured stage "
                   "times, step times alternated");
  add_model_pipeline_flags(*cmd, *o);
  cmd->add_option("--rounds", o->rounds, "alternated rounds (medians over rounds)")->capture_default_str();
  cmd->add_option("--steps", o->steps, "timed steps per partition and round")->capture_default_str();
  cmd->callback([o] { run(*o); });
}

}  // namespace brigade::cli
