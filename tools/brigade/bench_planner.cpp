// `brigade bench planner`: where --plan auto's choice lands among configurations measured.
// The planner searches the devices of --devices (and the other pipeline flags given, fixed)
// as `--plan auto` does; then a grid of --grid distinct configurations is opened: its choice,
// its nearest rivals in the planner's ranking, and others spread over those predicted within
// --within of it. --rounds rounds each run one SGD training step of every configuration, the
// order turning each round, after each one's warm-up (cli::warm_up; under mpirun, where one pipeline is
// open at a time, one configuration's rounds after another's). Reported: each configuration's predicted and measured step time and
// rank, the choice's measured time against the best measured (the planner's promise: within
// 10 %), and the rank correlation (Spearman) of predicted against measured.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "auto_plan.h"
#include "commands.h"
#include "optim/sgd.h"
#include "pipeline/executor.h"
#include "pipeline_flags.h"
#include "ranks.h"
#include "table.h"
#include "util/error.h"
#include "util/stats.h"
#include "util/units.h"

namespace brigade::cli {
namespace {

struct Options : ModelPipeline {
  uint32_t grid = 10;
  double within = 3.0;  // the grid's configurations: predicted within this factor of the best
  int rounds = 5;
  bool json = false;
};

struct Measured {
  AutoPlan::Row row;
  size_t rank = 0;  // in the planner's ranking, from 1
  std::optional<Pipeline> p;
  std::unique_ptr<optim::Sgd> sgd;
  uint64_t first = 1;  // the first step to time (warm_up)
  std::vector<double> ms;
};

// Ranks from 1, ties sharing their mean rank.
std::vector<double> ranks_of(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (size_t k = i; k <= j; ++k) r[order[k]] = double(i + j) / 2 + 1;
    i = j + 1;
  }
  return r;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const std::vector<double> x = ranks_of(a), y = ranks_of(b);
  const double n = double(x.size()), mx = std::accumulate(x.begin(), x.end(), 0.0) / n,
               my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i)
    sxy += (x[i] - mx) * (y[i] - my), sxx += (x[i] - mx) * (x[i] - mx), syy += (y[i] - my) * (y[i] - my);
  return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : 0.0;
}

void run(const Options& o) {
  if (o.grid < 2 || o.rounds < 1) throw UserError("--grid must be at least 2 and --rounds at least 1");
  const model::Model m = model::build(o.model, o.set);
  PipelineFlags f = o.pipeline;
  f.plan = "auto";
  const AutoPlan chosen = auto_plan(m, f, o.batch, 1);
  if (!o.json && world().rank() == 0) std::printf("%s\n%s\n", chosen.profiled.c_str(), chosen.line.c_str());
  // The grid: distinct configurations, the choice first; half of the rest its nearest rivals
  // in the ranking, half spread evenly over the whole ranking.
  std::vector<size_t> picks;
  std::set<std::string> seen;
  size_t n = 0;  // those predicted within --within of the choice
  while (n < chosen.ranked.size() && chosen.ranked[n].predicted_ms <= o.within * chosen.ranked[0].predicted_ms) ++n;
  auto take = [&](size_t i) {
    while (i < n && seen.count(chosen.ranked[i].same)) ++i;  // the next that runs differently
    if (i < n && picks.size() < o.grid) seen.insert(chosen.ranked[i].same), picks.push_back(i);
  };
  for (uint32_t g = 0; g < (o.grid + 1) / 2; ++g) take(0);
  const size_t spread = o.grid - picks.size();
  for (size_t g = 1; g <= spread; ++g) take(size_t(double(g) * double(n - 1) / double(spread)));
  std::sort(picks.begin(), picks.end());
  if (picks.size() < 2)
    throw UserError("--within " + format_number(o.within) + ": the " + std::to_string(n) +
                    " configurations predicted within " + format_number(o.within) + "x of the choice (of " +
                    std::to_string(chosen.ranked.size()) + " that fit) all run as it does, so there is none to "
                    "measure against it; raise --within or fix fewer pipeline flags");
  const pipeline::Batch batch = pipeline::random_batch(m, o.batch, 1);
  std::vector<std::unique_ptr<Measured>> grid;
  auto open = [&](Measured& x) {
    if (!o.json) std::fprintf(stderr, "opening %s\n", x.row.text.c_str());
    x.p.emplace(open_pipeline(m, x.row.flags, o.batch, 1));
    pipeline::Executor& ex = *x.p->executor;
    ex.initialize_parameters(0);
    x.sgd = std::make_unique<optim::Sgd>(optim::SgdOptions{.momentum = 0.9});
    ex.attach(*x.sgd);
    x.first = warm_up(ex, batch, x.sgd.get(), 0.01);
  };
  auto time_step = [&](Measured& x, int r) {
    const double t0 = pipeline::now_us();
    x.p->executor->train(batch, {x.sgd.get(), optim::Step{x.first + uint64_t(r), 0.01, 1}, 0});
    x.ms.push_back((pipeline::now_us() - t0) / 1e3);
  };
  for (size_t i : picks) {
    grid.push_back(std::make_unique<Measured>());
    grid.back()->row = chosen.ranked[i], grid.back()->rank = i + 1;
  }
  if (world().multi()) {
    // Across ranks one pipeline is open at a time (its links' tags would be another's): each
    // configuration's rounds in a row.
    for (auto& x : grid) {
      open(*x);
      for (int r = 0; r < o.rounds; ++r) time_step(*x, r);
      x->sgd.reset();
      x->p.reset();
    }
  } else {
    for (auto& x : grid) open(*x);
    for (int r = 0; r < o.rounds; ++r)
      for (size_t j = 0; j < grid.size(); ++j) time_step(*grid[(j + size_t(r)) % grid.size()], r);  // each round starts one later
  }
  std::vector<double> predicted, measured;
  for (const auto& x : grid) predicted.push_back(x->row.predicted_ms), measured.push_back(median(x->ms));
  const std::vector<double> measured_rank = ranks_of(measured);
  const size_t best = size_t(std::min_element(measured.begin(), measured.end()) - measured.begin());
  const double ratio = measured[0] / measured[best], rho = spearman(predicted, measured);
  if (world().rank() != 0) return;
  if (o.json) {
    nlohmann::json j{{"model", o.model}, {"batch", o.batch}, {"rounds", o.rounds}, {"choice_over_best", ratio},
                     {"spearman", rho}, {"configurations", chosen.ranked.size()}};
    for (size_t i = 0; i < grid.size(); ++i)
      j["grid"].push_back({{"configuration", grid[i]->row.text}, {"planner_rank", grid[i]->rank},
                           {"predicted_ms", predicted[i]}, {"measured_ms", measured[i]},
                           {"measured_ms_min", *std::min_element(grid[i]->ms.begin(), grid[i]->ms.end())},
                           {"measured_ms_max", *std::max_element(grid[i]->ms.begin(), grid[i]->ms.end())}});
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("%s, batch %u: %zu of the %zu configurations predicted within %gx of the choice (of %zu that fit), %d "
              "SGD steps each after warm-up, %s\n",
              o.model.c_str(), o.batch, grid.size(), n, o.within, chosen.ranked.size(), o.rounds,
              world().multi() ? "one configuration after another (ranks)" : "rounds alternated");
  std::vector<std::vector<std::string>> t{{"planner rank", "configuration (devices M schedule remat precision)",
                                           "predicted ms", "measured ms (min-max)", "measured rank"}};
  for (size_t i = 0; i < grid.size(); ++i)
    t.push_back({std::to_string(grid[i]->rank) + (i == 0 ? " (choice)" : ""), grid[i]->row.text, fixed(predicted[i], 1),
                 fixed(measured[i], 1) + " (" + fixed(*std::min_element(grid[i]->ms.begin(), grid[i]->ms.end()), 1) +
                     "-" + fixed(*std::max_element(grid[i]->ms.begin(), grid[i]->ms.end()), 1) + ")",
                 fixed(measured_rank[i], 1)});
  print_table(t);
  std::printf("choice: %.1f ms measured, best measured %.1f ms (%s): %.3fx, %s; Spearman rank correlation of "
              "predicted and measured %.2f\n",
              measured[0], measured[best], grid[best]->row.text.c_str(), ratio,
              ratio <= 1.10 ? "within 10 %" : "NOT within 10 %", rho);
}

}  // namespace

void add_bench_planner(CLI::App& bench) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = bench.add_subcommand(
      "planner", "--plan auto's choice against a grid of configurations measured: within 10 % of the best?");
  add_model_pipeline_flags(*cmd, *o);
  cmd->add_option("--grid", o->grid, "configurations to measure, the planner's choice among them")->capture_default_str();
  cmd->add_option("--within", o->within,
                 "draw the grid from configurations predicted within this factor of the choice's time")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1000.0));
  cmd->add_option("--rounds", o->rounds, "timed steps per configuration (the median is reported)")->capture_default_str();
  cmd->add_flag("--json", o->json, "print JSON instead of a table");
  cmd->callback([o] { run(*o); });
}

}  // namespace brigade::cli
