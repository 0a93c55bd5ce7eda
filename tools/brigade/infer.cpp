// `brigade eval` and `brigade sample`: forward-only uses of a trained model. Both read a
// checkpoint (a run's folder or its checkpoint.safetensors, which carries the model's TOML)
// or a plain parameters file with --model, and run it through the same pipeline as training.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>

#include "auto_plan.h"
#include "checks.h"
#include "commands.h"
#include "io/checkpoint.h"
#include "io/data.h"
#include "io/tensors.h"
#include "pipeline_flags.h"
#include "ranks.h"
#include "train.h"
#include "util/error.h"

namespace brigade::cli {
namespace {

struct Source {
  std::string path, model;  // parameters (checkpoint or file), model for plain parameter files
  std::vector<std::string> set;
};

struct Loaded {
  model::Model model;
  std::map<std::string, std::vector<float>> params;
  std::string data;  // the run's dataset ("" = default)
  uint64_t seed = 0;
};

void add_source(CLI::App* cmd, Source& s) {
  cmd->add_option("checkpoint", s.path, "a run's folder, its checkpoint.safetensors, or a parameters file (with --model)")
      ->required();
  cmd->add_option("--model", s.model, "preset or .toml for a plain parameters file (a checkpoint names its own)");
  cmd->add_option("--set", s.set, "override a model setting, with --model (repeatable)");
}

Loaded load(const Source& s) {
  std::string path = s.path;
  if (std::filesystem::is_directory(path)) path += "/checkpoint.safetensors";
  const io::SafeTensors file = io::SafeTensors::load(path);
  Loaded l;
  const auto& meta = file.metadata();
  if (meta.count("format") && meta.count("config")) {
    if (!s.model.empty())
      throw UserError("--model: " + path + " is a checkpoint and names its own model; drop the flag");
    const Settings st =
        settings_from_json(nlohmann::json::parse(meta.at("config"), nullptr, false), path);
    l.model = model::build_from_toml(st.model_toml, path + " (config)", {}, st.model);
    l.data = st.data, l.seed = st.seed;
  } else {
    if (s.model.empty())
      throw UserError(path + " is not a checkpoint; give the model of its parameters with --model");
    l.model = model::build(s.model, s.set);
  }
  l.params = io::read_parameters(file, l.model);  // NaN or infinite ones refused: they evaluate to a NaN loss
  return l;
}

// ---- eval

struct EvalArgs {
  Source source;
  std::string data;
  uint32_t batch_size = 64, limit = 0, window = 0;
  PipelineFlags pipeline;
};

void run_eval(const EvalArgs& a) {
  const Loaded l = load(a.source);
  const model::Model windowed = a.window ? model::with_window(l.model, a.window) : model::Model{};
  const model::Model& m = a.window ? windowed : l.model;
  const auto data = io::open_dataset(m, a.data.empty() ? l.data : a.data, l.seed);
  const std::vector<pipeline::Batch> batches = data->eval_batches(a.batch_size, a.limit);
  if (batches.empty()) throw UserError(std::string("the ") + data->eval_split() + " split holds no samples");
  // Planned for the largest batch there is (a split smaller than --batch-size is one batch).
  uint32_t rows = 0;
  for (const pipeline::Batch& b : batches) rows = std::max(rows, b.rows);
  Pipeline p = open_pipeline(m, a.pipeline, rows, 0);
  if (p.chosen) std::printf("%s\n", p.chosen->line.c_str());
  std::printf("%s", p.link_lines.c_str());
  for (const auto& [name, values] : l.params) p.executor->set_parameter(name, values);
  double loss = 0;
  uint64_t correct = 0, count = 0, samples = 0;
  for (const pipeline::Batch& b : batches) {
    const pipeline::EvalResult r = p.executor->evaluate(b);
    const uint64_t n = uint64_t(b.rows) * m.targets_per_sample;
    loss += r.loss * double(n), correct += r.correct, count += n, samples += b.rows;
  }
  loss /= double(count);
  const char* split = data->eval_split();
  if (m.token_input)
    std::printf("%s loss %.4f (%.3f bits per byte) over %llu windows of %u tokens\n", split, loss,
                loss / std::log(2.0), (unsigned long long)samples, m.targets_per_sample);
  else
    std::printf("%s loss %.4f, accuracy %.4f (%llu/%llu)\n", split, loss, double(correct) / double(count),
                (unsigned long long)correct, (unsigned long long)count);
}

// ---- sample

struct SampleArgs {
  Source source;
  std::string prompt = "\n";
  uint32_t length = 200, top_k = 0;
  double temperature = 0.8;
  uint64_t seed = 0;
  PipelineFlags pipeline;
};

// Picks the next byte from logits: greedy at temperature 0, else softmax(logits / T) over
// the top k (all when k = 0), drawn with a uniform number u in [0, 1).
int pick(const float* logits, uint32_t V, double temperature, uint32_t top_k, double u) {
  std::vector<uint32_t> order(V);
  for (uint32_t i = 0; i < V; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return logits[a] > logits[b]; });
  if (temperature <= 0) return int(order[0]);
  const uint32_t k = top_k ? std::min(top_k, V) : V;
  std::vector<double> w(k);
  double sum = 0;
  for (uint32_t i = 0; i < k; ++i) sum += w[i] = std::exp((logits[order[i]] - logits[order[0]]) / temperature);
  double acc = 0;
  for (uint32_t i = 0; i < k; ++i)
    if ((acc += w[i] / sum) > u) return int(order[i]);
  return int(order[k - 1]);
}

// The window a context of n bytes runs in: the smallest power of two from 8 that holds it,
// at most the block. A short context does not pay for a whole block per new byte, and at
// most log2(block / 8) + 2 pipelines are opened.
uint32_t window_for(size_t n, uint32_t block) {
  uint32_t w = 8;
  while (w < n && w < block) w *= 2;
  return std::min(w, block);
}

void run_sample(const SampleArgs& a) {
  if (world().multi())
    throw UserError("sample runs in one process (its logits come back to the host one byte at a time); start it without mpirun");
  const Loaded l = load(a.source);
  if (!l.model.token_input) throw UserError(l.model.name + " is not a text model; sample needs a GPT checkpoint");
  if (!(a.temperature >= 0) || !std::isfinite(a.temperature))
    throw UserError("--temperature must be a finite number, 0 (greedy) or more");
  const uint32_t block = l.model.block_size, V = l.model.classes;  // token input: a GPT
  if (V > 256)  // each token is written out as one byte
    throw UserError(l.model.name + ": sample writes each token as a byte, so a token model needs vocab_size 256 "
                    "or less (it has " + std::to_string(V) + ")");
  std::map<uint32_t, model::Model> models;  // by window; each outlives the pipeline that runs it
  std::map<uint32_t, Pipeline> pipelines;
  // --plan auto plans the first window opened, the largest the run reaches, and the smaller
  // ones run its choice (the same layers, so the same cut; they need less memory): profiling
  // every window would cost more than it could gain.
  PipelineFlags flags = a.pipeline;
  auto pipeline_for = [&](uint32_t w) -> Pipeline& {
    if (auto it = pipelines.find(w); it != pipelines.end()) return it->second;
    const model::Model& m =
        w == l.model.input.at(0) ? l.model : models.emplace(w, model::with_window(l.model, w)).first->second;
    Pipeline& p = pipelines.emplace(w, open_pipeline(m, flags, 1, 0)).first->second;
    flags = p.flags;
    // The text goes to stdout: the plan --plan auto chose, to stderr.
    if (p.chosen) std::fprintf(stderr, "windows of up to %u tokens: %s\n", w, p.chosen->line.c_str());
    for (const auto& [name, values] : l.params) p.executor->set_parameter(name, values);
    return p;
  };

  std::vector<int32_t> text;
  for (unsigned char c : a.prompt) text.push_back(c);
  if (text.empty()) throw UserError("--prompt: give at least one byte");
  for (size_t i = 0; i < text.size(); ++i)  // each byte is a token of the vocabulary
    if (uint32_t(text[i]) >= V)
      throw UserError("--prompt: byte " + std::to_string(i) + " is " + std::to_string(text[i]) + ", past " +
                      l.model.name + "'s vocabulary of " + std::to_string(V) + " tokens (0 to " +
                      std::to_string(V - 1) + ")");
  // The largest window the run reaches, planned first: a refusal comes before any output.
  if (a.length > 0) pipeline_for(window_for(std::min<size_t>(text.size() + a.length - 1, block), block));
  std::fwrite(a.prompt.data(), 1, a.prompt.size(), stdout);
  pipeline::Batch b;
  b.rows = 1;
  std::vector<float> logits;
  for (uint32_t i = 0; i < a.length; ++i) {
    // The last bytes that fit a block, from position 0: causal attention makes the padding
    // after them moot.
    const size_t n = std::min<size_t>(text.size(), block);
    const uint32_t w = window_for(n, block);
    b.tokens.assign(text.end() - long(n), text.end());
    b.tokens.resize(w, 0);
    b.targets.assign(w, 0);
    pipeline_for(w).executor->evaluate(b, &logits);
    const double u = double(io::order_key(a.seed, i, 0) >> 11) * 0x1.0p-53;
    const int next = pick(logits.data() + (n - 1) * V, V, a.temperature, a.top_k, u);
    text.push_back(next);
    std::fputc(next, stdout);
    std::fflush(stdout);
  }
  std::fputc('\n', stdout);
}

}  // namespace

void add_eval(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand("eval", "loss (and accuracy) of a checkpoint on the test or validation split");
  add_source(cmd, a->source);
  cmd->add_option("--data", a->data, "dataset (default: the run's, else the model's default)")
      ->check(path_check("a folder or a file"));
  cmd->add_option("--batch-size,-b", a->batch_size, "samples per evaluation batch")->capture_default_str()->check(kPositive);
  cmd->add_option("--limit", a->limit, "evaluate only the first N batches; 0 = all")->capture_default_str();
  cmd->add_option("--window", a->window, "a GPT: tokens per text window, 1 to its block_size (default: the block)")
      ->check(kPositive);
  add_pipeline_flags(*cmd, a->pipeline, PipelineUse::Evaluation);
  cmd->callback([a] { run_eval(*a); });
}

void add_sample(CLI::App& app) {
  auto a = std::make_shared<SampleArgs>();
  CLI::App* cmd = app.add_subcommand("sample", "generate text from a GPT checkpoint");
  add_source(cmd, a->source);
  cmd->add_option("--prompt", a->prompt, "text to continue (default: a newline)");
  cmd->add_option("--length", a->length, "bytes to generate")->capture_default_str();
  cmd->add_option("--temperature", a->temperature, "softmax temperature; 0 = always the likeliest byte")
      ->capture_default_str();
  cmd->add_option("--top-k", a->top_k, "sample among the k likeliest bytes; 0 = all")->capture_default_str();
  cmd->add_option("--seed", a->seed, "seed of the sampling")->capture_default_str()->check(kNonNegative);
  add_pipeline_flags(*cmd, a->pipeline, PipelineUse::Generation);
  cmd->callback([a] { run_sample(*a); });
}

}  // namespace brigade::cli
