// `brigade init` and `brigade step`: the interop contract of DESIGN.md. init writes a
// model's initial parameters; step runs one pipelined forward and backward of a batch and
// writes the loss and every parameter's gradient, all as safetensors under PyTorch's names.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <fstream>
#include <string>

#include "checks.h"
#include "auto_plan.h"
#include "commands.h"
#include "io/tensors.h"
#include "optim/loss_scale.h"
#include "pipeline/relay.h"
#include "pipeline_flags.h"
#include "ranks.h"
#include "util/units.h"

namespace brigade::cli {
namespace {

struct InitArgs {
  std::string model, out;
  std::vector<std::string> set;
  uint64_t seed = 0;
};

struct StepArgs {
  std::string model, params, batch, out, trace;
  std::vector<std::string> set;
  PipelineFlags pipeline;
  uint32_t repeat = 1;
  bool quiet = false;
};

// The memory this process may take: the machine's, or its control group's limit where lower
// (cgroup v2's memory.max, v1's memory.limit_in_bytes: a container's).
uint64_t usable_memory() {
  uint64_t memory = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGE_SIZE));
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(path);
    uint64_t limit = 0;
    if (in >> limit && limit > 0) memory = std::min(memory, limit);  // "max" reads as no number
  }
  return memory;
}

void run_init(const InitArgs& a) {
  const model::Model m = model::build(a.model, a.set);
  // The values are made in host memory and written from a second copy of them: refused where
  // the two do not fit in the machine's memory, before anything is allocated.
  const uint64_t bytes = m.parameter_count() * 4, memory = usable_memory();
  if (bytes > memory / 2)
    throw UserError(m.name + ": its parameters take " + format_bytes(bytes) + ", twice that while written; this process may take " +
                    format_bytes(memory) + " of memory");
  io::check_writable(a.out);
  io::initial_parameters(m, a.seed).write(a.out);
  std::printf("%s: %s parameters (%s) of %s, seed %llu\n", a.out.c_str(),
              std::to_string(m.parameter_count()).c_str(),
              format_bytes(m.parameter_count() * 4).c_str(), m.name.c_str(),
              (unsigned long long)a.seed);
}

void run_step(const StepArgs& a) {
  if (!world().multi())  // where the results go, checked before the work (one process)
    for (const std::string& path : {a.out, a.trace})
      if (!path.empty()) io::check_writable(path);
  agree("the batch file", file_hash(a.batch));  // under mpirun, each rank reads its own copy
  agree("the parameters file", file_hash(a.params));
  const io::SafeTensors batch_file = io::SafeTensors::load(a.batch);
  const model::Model m = io::model_for_batch(model::build(a.model, a.set), batch_file);
  const auto params = io::read_parameters(io::SafeTensors::load(a.params), m);
  const pipeline::Batch batch = io::read_batch(batch_file, m);
  Pipeline p = open_pipeline(m, a.pipeline, batch.rows, 0);
  for (const auto& [name, values] : params) p.executor->set_parameter(name, values);
  // fp16: PyTorch's initial loss scale, halved as GradScaler halves it after each step whose
  // gradients overflowed (here the same step again), down to the least scale a run skips at;
  // the gradients written are divided by it again.
  const bool scales = scales_loss(p.precision);
  optim::LossScale scaler;
  if (!scales) scaler.scale = 1.0;
  // Without an update every run computes the same gradients; later runs find the kernels
  // compiled and the caches warm, so their trace shows the pipeline rather than start-up.
  pipeline::StepResult r;
  std::vector<double> ms;  // each run's wall time, the first (start-up) left out
  for (uint32_t i = 0; i < a.repeat; ++i) {
    const double t0 = pipeline::now_us();
    pipeline::Update u{nullptr, {}, 0, scaler.scale};
    u.skips = scales;
    r = p.executor->train(batch, u);
    while (r.skipped && scaler.scale > optim::LossScale::kMinimum) {
      scaler.update(true);
      u.loss_scale = scaler.scale;
      r = p.executor->train(batch, u);
    }
    // At the least scale the executor stops on gradients that are not finite rather than skip.
    BRIGADE_EXPECT(!r.skipped, "no step is skipped at the least loss scale");
    if (i > 0) ms.push_back((pipeline::now_us() - t0) / 1000.0);
  }

  // Under mpirun every rank has its stage's gradients; rank 0 writes them all.
  std::map<std::string, std::vector<float>> mine;
  const std::vector<std::string> held = p.executor->held();
  for (const model::ParamSpec& spec : m.params())
    if (spec.kind == model::ParamKind::Trainable && std::find(held.begin(), held.end(), spec.name) != held.end())
      mine[spec.name] = p.executor->gradient(spec.name);
  const std::map<std::string, std::vector<float>> grads = gather_tensors(mine);
  r.trace = gather_trace(r.trace, p.executor->stages());
  if (world().rank() != 0) return;
  io::SafeTensorsWriter out;
  const float loss = float(r.loss);
  out.add("loss", {}, std::span<const float>(&loss, 1));
  for (const model::ParamSpec& spec : m.params())
    if (spec.kind == model::ParamKind::Trainable) out.add(spec.name, spec.shape, grads.at(spec.name));
  out.set_metadata("model", m.name);
  out.set_metadata("micro_batches", std::to_string(p.flags.micro_batches));  // --plan auto's where it chose
  out.set_metadata("stages", std::to_string(p.executor->stages()));
  if (scales) {  // a power of two down to 2^-24, written exactly
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", scaler.scale);
    out.set_metadata("loss_scale", text);
  }
  if (world().multi()) out.set_metadata("replicas", std::to_string(a.pipeline.replicas));
  out.write(a.out);
  if (!a.trace.empty()) {
    const std::string json = r.trace.chrome_json();
    io::write_atomically(a.trace, json);
  }
  if (a.quiet) return;
  std::printf("loss %.6f over %u samples; gradients of %zu tensors written to %s\n", loss,
              batch.rows, params.size(), a.out.c_str());
  if (scales)
    std::printf("fp16: loss scale %g (%llu halving(s) of %g, as GradScaler backs off after overflowed steps)\n",
                scaler.scale, (unsigned long long)scaler.skipped_steps, optim::LossScale::kInitial);
  if (p.chosen) std::printf("%s\n", p.chosen->line.c_str());
  std::printf("%s%s", p.link_lines.c_str(), pipeline::to_string(r.trace.summary()).c_str());
  if (!ms.empty()) {
    std::sort(ms.begin(), ms.end());
    std::printf("step time: median %.2f ms, range %.2f-%.2f ms over %zu runs after the first\n", ms[ms.size() / 2],
                ms.front(), ms.back(), ms.size());
  }
}

}  // namespace

void add_init(CLI::App& app) {
  auto a = std::make_shared<InitArgs>();
  CLI::App* cmd = app.add_subcommand("init", "write a model's initial parameters (safetensors)");
  cmd->add_option("--model", a->model, "preset name or a model .toml file")->required();
  cmd->add_option("--set", a->set, "override a model setting, e.g. --set n_layer=6 (repeatable)");
  cmd->add_option("--seed", a->seed, "random seed")->capture_default_str()->check(kNonNegative);
  cmd->add_option("--out", a->out, "parameters file to write")->required();
  cmd->callback([a] { run_init(*a); });
}

void add_step(CLI::App& app) {
  auto a = std::make_shared<StepArgs>();
  CLI::App* cmd = app.add_subcommand(
      "step", "one pipelined forward and backward of a batch: writes the loss and every gradient");
  cmd->add_option("--model", a->model, "preset name or a model .toml file")->required();
  cmd->add_option("--set", a->set, "override a model setting (repeatable)");
  cmd->add_option("--params", a->params, "parameters (safetensors, PyTorch names)")->required();
  cmd->add_option("--batch", a->batch, "batch: 'input' and 'target' (safetensors); a GPT's token windows [N, T] may be shorter than its block")->required();
  cmd->add_option("--out", a->out, "where to write 'loss' and the gradients")->required();
  cmd->add_option("--trace", a->trace, "write a Chrome trace-event JSON of the step");
  cmd->add_option("--repeat", a->repeat, "run the step this many times; the trace and summary are the last run's")
      ->check(CLI::Range(1u, 1000u))
      ->capture_default_str();
  cmd->add_flag("--quiet,-q", a->quiet, "print nothing on success");
  add_pipeline_flags(*cmd, a->pipeline);
  cmd->callback([a] { run_step(*a); });
}

}  // namespace brigade::cli
