// `brigade bench capacity`: GPipe's Table 1 for Brigade's GPT. Under one --mem-limit on every
// stage, the largest GPT that trains, for each row of --configs (K stages, a remat mode and
// a schedule):
// for each width of --widths the planner finds the largest n_layer whose plan fits (its
// per-stage memory is exact), the row keeps the width with the most parameters, and then
// proves it: one real training step with the cap enforced by every stage's allocator, and the
// planner refusing one block more.
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "checks.h"
#include "commands.h"
#include "io/safetensors.h"
#include "io/svg.h"
#include "optim/adamw.h"
#include "optim/sgd.h"
#include "pipeline/batch.h"
#include "pipeline/relay.h"
#include "pipeline_flags.h"
#include "table.h"
#include "util/units.h"
#include "util/error.h"

namespace brigade::cli {
namespace {

// The model builder's limit on n_layer (engine/model/builder.cpp).
constexpr uint32_t kMaxDepth = 4096;
// --max-layers' default: the deepest the search plans. Planning one depth costs more the
// deeper it is (about 18 s at 1024 layers for K=1 on lavapipe), and a cap that holds 256
// blocks of the narrowest width says what the table is for.
constexpr uint32_t kDefaultMaxLayers = 256;

// The defaults (docs/BENCHMARKS.md): a mini-batch of 16 sequences in 16 micro-batches of one.
// Without remat all 16 keep their activations, which then outweigh the parameter state (a
// gpt-mini block at n_embd 256 keeps 32 MiB of activations beside 12 MiB of parameters,
// gradients and AdamW state), so remat has much to free; with it a stage keeps 16 inputs and
// one sequence's activations. 128MiB keeps K=8's step under a minute on lavapipe (256MiB: over
// two). n_embd 128 is left out: K=8 reaches 248 blocks there, where each depth tried costs the
// planner some 45 s.
struct Options {
  std::string model = "gpt-mini";
  std::string mem_limit = "128MiB";
  std::vector<uint32_t> widths{256, 384, 512};
  uint32_t batch = 16;
  uint32_t micro_batches = 16;
  std::string optimizer = "adamw";
  std::vector<std::string> configs{"1:never", "1:always", "2:always", "4:always", "8:always"};
  std::string device = "0";
  bool json = false;
  bool no_step = false;
  uint32_t max_layers = kDefaultMaxLayers;  // the search stops there: "at least" that many
  std::string svg;  // folder for capacity.svg
};

// One row of the table: K stages, one remat mode, one schedule, one storage precision.
struct Config {
  uint32_t K = 1;
  std::string remat, schedule = "gpipe", precision = "fp32";
  std::string name() const {
    return "K=" + std::to_string(K) + " " + remat + (schedule == "gpipe" ? "" : " " + schedule) +
           (precision == "fp32" ? "" : " " + precision);
  }
  std::string series() const {
    return "remat " + remat + (schedule == "gpipe" ? "" : ", " + schedule) + (precision == "fp32" ? "" : ", " + precision);
  }
};

// K logical devices of --device, each under --mem-limit, for one row.
PipelineFlags row_flags(const Options& o, const Config& c) {
  PipelineFlags f;
  f.devices = logical_devices(o.device, c.K);
  f.micro_batches = o.micro_batches;
  f.remat = c.remat;
  f.schedule = c.schedule;
  f.precision = c.precision;
  f.mem_limit = o.mem_limit;
  return f;
}

Config parse_config(const std::string& text) {
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t colon = text.find(':', start);
    parts.push_back(text.substr(start, colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  const auto K = parse_uint_list(parts[0]);
  if (parts.size() < 2 || parts.size() > 4 || !K || K->size() != 1 || K->front() == 0 || K->front() > 64)
    throw UserError("--configs: '" + text + "' is not K:remat[:schedule[:precision]] with 1 <= K <= 64, such as "
                    "4:always, 4:never:1f1b or 4:always:gpipe:bf16");
  Config c{K->front(), parts[1]};
  if (parts.size() > 2) c.schedule = parts[2];
  if (parts.size() > 3) c.precision = parts[3];
  if (c.precision != "fp32" && c.precision != "bf16" && c.precision != "fp16")
    throw UserError("--configs: '" + text + "': '" + c.precision + "' is not a precision; expected fp32, bf16 or fp16");
  if (c.remat != "never" && c.remat != "always" && c.remat != "except-last")
    throw UserError("--configs: '" + text + "': '" + c.remat + "' is not a remat mode; expected never, always or except-last");
  if (c.schedule != "gpipe" && c.schedule != "1f1b" && c.schedule != "zb")
    throw UserError("--configs: '" + text + "': '" + c.schedule + "' is not a schedule a row can take; expected gpipe, 1f1b or zb");
  return c;
}

uint32_t optimizer_states(const std::string& name) {
  if (name == "adamw") return 2;
  if (name == "sgd") return 1;  // momentum 0.9
  throw UserError("--optimizer: '" + name + "' is not an optimizer; expected adamw or sgd");
}

// The shape the widths scale: the preset's block_size and head size (n_embd / n_head).
struct Base {
  std::string name;
  uint32_t block_size = 0, head_size = 0;
};

Base base_of(const std::string& model) {
  const model::Model m = model::build(model);
  const toml::table config = toml::parse(m.config);  // the builder wrote and read it
  if (config["type"].value_or(std::string("sequential")) != "gpt")
    throw UserError("bench capacity: " + m.name + " is not a GPT; it grows a model of type = \"gpt\" "
                    "in depth and width (gpt-mini, gpt-small, gpt2-small or a .toml of that type)");
  const int64_t n_head = config["n_head"].value_or(int64_t(0)), n_embd = config["n_embd"].value_or(int64_t(0));
  return {m.name, uint32_t(config["block_size"].value_or(int64_t(0))), uint32_t(n_embd / n_head)};
}

std::string format_count(uint64_t n) {
  char buf[32];
  if (n >= 1000000000) std::snprintf(buf, sizeof buf, "%.2fB", n / 1e9);
  else if (n >= 1000000) std::snprintf(buf, sizeof buf, "%.1fM", n / 1e6);
  else std::snprintf(buf, sizeof buf, "%.1fK", n / 1e3);
  return buf;
}

// What the planner says about one depth.
struct Probe {
  bool fits = false;
  bool planned = false;     // false: refused unplanned, its parameter state alone is over K caps
  uint64_t parameters = 0;
  uint64_t fullest = 0;     // the fullest stage's planned total (planned only)
  std::string problem;      // the planner's line when a planned depth does not fit
};

// The largest depth of one width under one row's caps. Fitting is monotone in depth for a
// GPT: taking one block out of a fitting cut never grows a stage, so a binary search holds.
class DepthSearch {
 public:
  DepthSearch(const Options& o, const Config& c, uint32_t n_embd, uint32_t head_size, Devices& d)
      : o_(o), c_(c), n_embd_(n_embd), n_head_(n_embd / head_size), devices_(d),
        states_(optimizer_states(o.optimizer)), flags_(row_flags(o, c)) {}

  // The smallest depth a K-stage cut can hold: embedding, n_layer blocks, ln_f and lm_head
  // are n_layer + 3 layers, one at least per stage.
  uint32_t shallowest() const { return c_.K > 4 ? c_.K - 3 : 1; }

  model::Model build(uint32_t n_layer) const {
    return model::build(o_.model, {"n_layer=" + std::to_string(n_layer), "n_embd=" + std::to_string(n_embd_),
                                   "n_head=" + std::to_string(n_head_)});
  }

  // With `plan` false, a depth whose parameters, gradients and optimizer state alone exceed
  // the K caps together is refused without running the planner: its exact cut lays out each
  // of O(L²) candidate cells, O(L³) layer visits, seconds at a few hundred layers.
  const Probe& probe(uint32_t n_layer, bool plan = false) {
    auto it = probes_.find(n_layer);
    if (it != probes_.end() && (it->second.planned || !plan)) return it->second;
    const model::Model m = build(n_layer);
    Probe p;
    p.parameters = m.parameter_count();
    uint64_t state = 0;
    for (const model::ParamSpec& s : m.params())
      state += s.elements() * 4 * (s.kind == model::ParamKind::Trainable ? 2 + states_ : 1);
    if (plan || state <= c_.K * devices_.caps[0]) {
      const pipeline::Plan pl = make_plan(m, flags_, devices_, o_.batch, states_);
      for (const pipeline::CellLayout& l : pl.cells) p.fullest = std::max(p.fullest, pipeline::total(l.memory(states_)));
      p.planned = true, p.fits = pl.problem.empty(), p.problem = pl.problem;
    }
    return probes_[n_layer] = p;
  }

  // The largest depth that fits, or 0 when not even shallowest() does: doubling, then halving.
  // At --max-layers the search stops: the depth it returns then is a lower bound.
  uint32_t largest() {
    uint32_t fit = shallowest();
    if (!shown(fit).fits) return 0;
    uint32_t over = fit;
    while (over < o_.max_layers) {
      over = std::min(o_.max_layers, over * 2);
      if (!shown(over).fits) break;
      fit = over;
    }
    if (fit >= o_.max_layers) return fit;
    while (over - fit > 1) {
      const uint32_t mid = fit + (over - fit) / 2;
      (shown(mid).fits ? fit : over) = mid;
    }
    return fit;
  }

  const PipelineFlags& flags() const { return flags_; }
  uint32_t n_head() const { return n_head_; }

 private:
  // probe(), each depth tried said on stderr as it is decided (planning one takes seconds).
  const Probe& shown(uint32_t n_layer) {
    const Probe& p = probe(n_layer);
    if (!o_.json)
      std::fprintf(stderr, "%s, n_embd %u: n_layer %u %s\n", c_.name().c_str(), n_embd_, n_layer,
                   p.fits ? "fits" : p.planned ? "does not fit" : "does not fit (parameter state alone)");
    return p;
  }

  const Options& o_;
  Config c_;
  uint32_t n_embd_, n_head_;
  Devices& devices_;
  uint32_t states_;
  PipelineFlags flags_;
  std::map<uint32_t, Probe> probes_;
};

struct Row {
  Config config;
  std::vector<std::optional<uint32_t>> depth;  // per width: the largest n_layer, if any fits
  std::vector<uint64_t> parameters;           // per width, at that depth
  std::vector<bool> bounded;                  // per width: the depth is --max-layers, a lower bound
  uint32_t n_layer = 0, n_embd = 0, n_head = 0;
  uint64_t params = 0, planned = 0, next = 0;  // fullest stage at n_layer and at n_layer + 1
  bool at_bound = false;                       // n_layer = --max-layers: at least that many fit
  uint64_t peak = 0;                           // the fullest stage's measured peak
  double step_s = NAN, loss = NAN, relative = NAN;
};

// One training step of the row's model with every stage capped; fills the measured fields.
void prove(const Options& o, const DepthSearch& s, Row& r) {
  const model::Model m = s.build(r.n_layer);
  Pipeline p = open_pipeline(m, s.flags(), o.batch, optimizer_states(o.optimizer));
  pipeline::Executor& ex = *p.executor;
  ex.initialize_parameters(0);
  std::unique_ptr<optim::Optimizer> opt;
  if (o.optimizer == "adamw") opt = std::make_unique<optim::AdamW>(optim::AdamWOptions{});
  else opt = std::make_unique<optim::Sgd>(optim::SgdOptions{.momentum = 0.9});
  ex.attach(*opt);
  // The step's peak: on a device whose memory the host cannot map, setting the parameters
  // went through staging copies, which the step does not hold.
  for (auto& d : p.devices) d->memory().reset_peaks();
  const pipeline::Batch batch = pipeline::random_batch(m, o.batch, 1);
  const double t0 = pipeline::now_us();
  const pipeline::StepResult step = ex.train(batch, {opt.get(), optim::Step{1, 1e-3, 1}, 0});
  r.step_s = (pipeline::now_us() - t0) / 1e6;
  r.loss = step.loss;
  if (!std::isfinite(r.loss))
    throw UserError(r.config.name() + ": the step's loss is " + std::to_string(r.loss) + ", not finite");
  for (auto& d : p.devices) r.peak = std::max(r.peak, d->memory().stats().total_peak);
}

Row measure(const Options& o, const Base& base, const Config& c) {
  Row r{c};
  Devices d = open_devices(row_flags(o, c));
  std::optional<DepthSearch> best;
  for (uint32_t n_embd : o.widths) {
    DepthSearch s(o, c, n_embd, base.head_size, d);
    const uint32_t L = s.largest();
    r.depth.push_back(L ? std::optional<uint32_t>(L) : std::nullopt);
    r.bounded.push_back(L >= o.max_layers);
    r.parameters.push_back(L ? s.probe(L).parameters : 0);
    if (!o.json)
      std::fprintf(stderr, "%s, n_embd %u: %s\n", c.name().c_str(), n_embd,
                   L ? ("n_layer " + std::string(L >= o.max_layers ? "at least " : "") + std::to_string(L) + ", " +
                        format_count(r.parameters.back()) + " parameters")
                           .c_str()
                     : "not even the shallowest fits");
    if (L && s.probe(L).parameters > r.params) {
      r.params = s.probe(L).parameters, r.n_layer = L, r.n_embd = n_embd, r.n_head = s.n_head();
      r.planned = s.probe(L, true).fullest;
      best.emplace(s);
    }
  }
  if (!best) {  // why, in the planner's words, for the narrowest width
    DepthSearch s(o, c, *std::min_element(o.widths.begin(), o.widths.end()), base.head_size, d);
    throw UserError(c.name() + ": no n_embd of --widths fits under --mem-limit " + o.mem_limit + " even at n_layer " +
                    std::to_string(s.shallowest()) + "; the narrowest: " + s.probe(s.shallowest(), true).problem);
  }
  // The boundary: one block more is refused by the planner itself (not searched past --max-layers).
  r.at_bound = r.n_layer >= o.max_layers;
  if (!r.at_bound) {
    const Probe& next = best->probe(r.n_layer + 1, true);
    BRIGADE_EXPECT(!next.fits, "a depth over the largest found must not fit");
    r.next = next.fullest;
  }
  if (o.no_step) return r;
  d.devices.clear();  // the planning devices go before the pipeline opens its own
  d.instance.reset();
  if (!o.json)
    std::fprintf(stderr, "%s: one training step of n_layer %u, n_embd %u\n", c.name().c_str(), r.n_layer, r.n_embd);
  prove(o, *best, r);
  return r;
}

void print(const Options& o, const Base& base, uint64_t cap, const std::vector<Row>& rows) {
  auto fixed = [](double v, const char* format) {
    char buf[32];
    std::snprintf(buf, sizeof buf, std::isfinite(v) ? format : "-", v);
    return std::string(buf);
  };
  std::printf("%s: block_size %u, head size %u; mini-batch %u as %u micro-batches, %s; --mem-limit %s on every stage\n",
              base.name.c_str(), base.block_size, base.head_size, o.batch, o.micro_batches, o.optimizer.c_str(),
              format_bytes(cap).c_str());
  std::printf("\nlargest n_layer per n_embd (parameters), from the planner\n");
  std::vector<std::vector<std::string>> t{{"row"}};
  for (uint32_t w : o.widths) t[0].push_back("n_embd " + std::to_string(w));
  for (const Row& r : rows) {
    t.push_back({r.config.name()});
    for (size_t i = 0; i < o.widths.size(); ++i)
      t.back().push_back(r.depth[i] ? (r.bounded[i] ? "at least " : "") + std::to_string(*r.depth[i]) + " (" +
                                          format_count(r.parameters[i]) + ")"
                                    : "-");
  }
  print_table(t);
  std::printf("\nthe largest per row, trained one step with every stage capped\n");
  t = {{"K", "remat", "schedule", "precision", "n_layer", "n_embd", "n_head", "parameters", "planned", "peak", "cap",
        "n_layer+1 needs", "step s", "loss", "vs K=1 never"}};
  for (const Row& r : rows)
    t.push_back({std::to_string(r.config.K), r.config.remat, r.config.schedule, r.config.precision,
                 (r.at_bound ? "at least " : "") + std::to_string(r.n_layer), std::to_string(r.n_embd),
                 std::to_string(r.n_head), format_count(r.params), format_bytes(r.planned),
                 o.no_step ? "-" : format_bytes(r.peak), format_bytes(cap),
                 r.at_bound ? "not searched (--max-layers)" : format_bytes(r.next),
                 fixed(r.step_s, "%.1f"), fixed(r.loss, "%.4f"), fixed(r.relative, "%.2fx")});
  print_table(t);
  if (std::any_of(rows.begin(), rows.end(), [](const Row& r) {
        return std::find(r.bounded.begin(), r.bounded.end(), true) != r.bounded.end();
      }))
    std::printf("\nat least: the search stopped at --max-layers %u, which fits there; a larger --max-layers searches "
                "deeper\n", o.max_layers);
}

// capacity.svg: parameters against K, one line per remat mode, on a log scale.
void write_chart(const Options& o, uint64_t cap, const std::vector<Row>& rows) {
  io::Chart c{"the largest GPT under " + format_bytes(cap) + " per stage", "stages K", "parameters", {}, true};
  for (const Row& r : rows) {
    auto it = std::find_if(c.series.begin(), c.series.end(),
                           [&](const io::Series& s) { return s.label == r.config.series(); });
    if (it == c.series.end())
      it = c.series.insert(c.series.end(), io::Series{r.config.series(), {}, {}, false, true});
    it->x.push_back(r.config.K), it->y.push_back(double(r.params));
  }
  const std::string path = o.svg + "/capacity.svg";
  io::write_atomically(path, io::render_svg(c));
  if (!o.json) std::fprintf(stderr, "wrote %s\n", path.c_str());
}

void run(const Options& o) {
  if (o.widths.empty()) throw UserError("--widths: give at least one n_embd");
  if (o.mem_limit.find(',') != std::string::npos)
    throw UserError("--mem-limit: '" + o.mem_limit + "' is a list; bench capacity puts one cap on every stage");
  const uint64_t cap = parse_size(o.mem_limit, "--mem-limit");
  if (cap == 0) throw UserError("--mem-limit: give one positive cap for every stage, such as 128MiB");
  const Base base = base_of(o.model);
  for (uint32_t w : o.widths)
    if (w == 0 || w % base.head_size)
      throw UserError("--widths: " + std::to_string(w) + " is not a positive multiple of " + base.name +
                      "'s head size " + std::to_string(base.head_size) + " (n_embd / n_head)");
  optimizer_states(o.optimizer);
  std::vector<Config> configs;
  for (const std::string& text : o.configs) configs.push_back(parse_config(text));
  if (!o.svg.empty()) prepare_chart_folder(o.svg, {"capacity.svg"});

  std::vector<Row> rows;
  for (const Config& c : configs) rows.push_back(measure(o, base, c));
  for (Row& r : rows)
    for (const Row& naive : rows)
      if (naive.config.K == 1 && naive.config.remat == "never" && naive.config.schedule == "gpipe" &&
          naive.config.precision == "fp32") {
        r.relative = double(r.params) / double(naive.params);
        break;
      }

  if (!o.json) {
    print(o, base, cap, rows);
    if (!o.svg.empty()) write_chart(o, cap, rows);
    return;
  }
  auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  nlohmann::json j{{"model", base.name},       {"block_size", base.block_size}, {"head_size", base.head_size},
                   {"batch", o.batch},         {"micro_batches", o.micro_batches}, {"optimizer", o.optimizer},
                   {"cap_bytes", cap},         {"widths", o.widths},             {"results", nlohmann::json::array()}};
  for (const Row& r : rows) {
    nlohmann::json depths = nlohmann::json::array();
    for (size_t i = 0; i < o.widths.size(); ++i)
      depths.push_back({{"n_embd", o.widths[i]},
                        {"n_layer", r.depth[i] ? nlohmann::json(*r.depth[i]) : nlohmann::json()},
                        {"parameters", r.parameters[i]}, {"at_max_layers", bool(r.bounded[i])}});
    j["results"].push_back({{"stages", r.config.K}, {"remat", r.config.remat}, {"schedule", r.config.schedule},
                            {"precision", r.config.precision}, {"n_layer", r.n_layer},
                            {"at_max_layers", r.at_bound}, {"n_embd", r.n_embd}, {"n_head", r.n_head},
                            {"parameters", r.params},
                            {"planned_bytes", r.planned},
                            {"peak_bytes", o.no_step ? nlohmann::json() : nlohmann::json(r.peak)},
                            {"next_depth_bytes", r.at_bound ? nlohmann::json() : nlohmann::json(r.next)},
                            {"step_seconds", number(r.step_s)}, {"loss", number(r.loss)},
                            {"relative_to_naive", number(r.relative)}, {"widths", depths}});
  }
  j["max_layers"] = o.max_layers;
  std::printf("%s\n", j.dump(2).c_str());
  if (!o.svg.empty()) write_chart(o, cap, rows);
}

}  // namespace

void add_bench_capacity(CLI::App& bench) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = bench.add_subcommand(
      "capacity", "GPipe's Table 1: the largest GPT that trains under one memory cap per stage, for K stages "
                  "with and without remat");
  cmd->add_option("--model", o->model, "GPT preset or .toml whose block_size and head size the widths keep")
      ->capture_default_str();
  cmd->add_option("--mem-limit", o->mem_limit, "memory cap of every stage")->capture_default_str();
  cmd->add_option("--widths", o->widths, "n_embd values to try (multiples of the head size)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--batch-size,-b", o->batch, "samples per mini-batch")->capture_default_str()->check(kPositive);
  cmd->add_option("--micro-batches,-m", o->micro_batches, "micro-batches M per mini-batch")
      ->capture_default_str()
      ->check(kPositive);
  cmd->add_option("--optimizer", o->optimizer, "adamw or sgd (momentum 0.9): the state the cap must hold")
      ->capture_default_str();
  cmd->add_option("--configs", o->configs, "rows as K:remat[:schedule[:precision]] (stages, re-materialization, gpipe, "
                                          "1f1b or zb, and fp32, bf16 or fp16)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--device", o->device, "device from `brigade devices`: index, part of its name or a UUID prefix")->capture_default_str();
  cmd->add_flag("--json", o->json, "print JSON instead of tables");
  cmd->add_flag("--no-step", o->no_step, "plan only: no training step");
  cmd->add_option("--max-layers", o->max_layers,
                  "deepest n_layer the search plans; a row that fits there reads \"at least\" that many")
      ->capture_default_str()
      ->check(CLI::Range(1u, kMaxDepth));
  cmd->add_option("--svg", o->svg, "folder to write capacity.svg into");
  cmd->callback([o] { run(*o); });
}

}  // namespace brigade::cli
