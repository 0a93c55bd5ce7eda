// `brigade train`: trains a model through the pipeline on Fashion-MNIST or a text file,
// evaluating and checkpointing as it goes. Progress is a live line on a terminal and plain
// log lines otherwise; DIR/metrics.jsonl gets one JSON record per step and evaluation.
#include "train.h"
#include "train_start.h"

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <typeinfo>

#include "auto_plan.h"
#include "checks.h"
#include "commands.h"
#include "io/checkpoint.h"
#include "io/data.h"
#include "io/files.h"
#include "io/metrics.h"
#include "optim/adamw.h"
#include "optim/lr_schedule.h"
#include "optim/sgd.h"
#include "pipeline/partition.h"
#include "pipeline/schedule.h"
#include "pipeline_flags.h"
#include "progress.h"
#include "ranks.h"
#include "recovery.h"
#include "vk/check.h"

namespace brigade::cli {

namespace {

std::atomic<int> g_signal{0};
extern "C" void on_signal(int sig) { g_signal = sig; }

struct Evaluation {
  double loss = 0, accuracy = 0;
  uint64_t correct = 0, count = 0;
};

// The pipeline's devices as `brigade devices` lists them now, with their drivers' names: "0,1
// (llvmpipe, SwiftShader driver)"; under mpirun, the flags' devices.
std::string devices_named(const Pipeline& p, const PipelineFlags& flags) {
  if (world().multi()) return flags.devices;
  std::string indices, names;
  for (const auto& dev : p.devices) {
    const vk::PhysicalInfo& info = dev->info();
    indices += (indices.empty() ? "" : ",") + std::to_string(info.index);
    names += (names.empty() ? "" : ", ") + (info.driver_name.empty() ? info.name : info.driver_name);
  }
  return indices + " (" + names + ")";
}

// Whether two recorded plans are one: their devices' UUIDs and names compared where both keep
// them (a plan recorded before they were kept is the same plan on the same indices).
bool same_plan(nlohmann::json a, nlohmann::json b) {
  const bool both = a.is_object() && b.is_object() && a.contains("device_uuids") && b.contains("device_uuids");
  for (nlohmann::json* j : {&a, &b})
    if (!both && j->is_object()) j->erase("device_uuids"), j->erase("device_names");
  return a == b;
}

Evaluation evaluate(pipeline::Executor& ex, const std::vector<pipeline::Batch>& batches, uint32_t tps) {
  Evaluation e;
  double loss = 0;
  for (const pipeline::Batch& b : batches) {
    const pipeline::EvalResult r = ex.evaluate(b);
    const uint64_t n = uint64_t(b.rows) * tps;
    loss += r.loss * double(n);
    e.correct += r.correct;
    e.count += n;
  }
  e.loss = loss / double(e.count);
  e.accuracy = double(e.correct) / double(e.count);
  return e;
}

void run_train(TrainArgs& a) {
  namespace fs = std::filesystem;
  const std::string ckpt = a.out + "/checkpoint.safetensors";
  // One run writes a folder at a time (rank 0, which writes it): a second is refused before
  // it reads or writes anything there; a new folder is locked once made. A resume waits a
  // while: brigade supervise restarts a job as its killed ranks exit.
  std::optional<io::FolderLock> lock;
  const auto take_lock = [&] {
    try {
      if (world().rank() == 0 && !lock && fs::is_directory(a.out)) {
        lock.emplace(a.out, a.resume ? 10.0 : 0.0);
        if (!lock->unheld().empty())
          std::fprintf(stderr, "brigade: warning: %s: not locked against another run: %s\n", a.out.c_str(),
                       lock->unheld().c_str());
      }
    } catch (const UserError& e) {
      throw UserError(std::string(e.what()) + " (another brigade train?); wait for it to end or choose another --out");
    }
  };
  take_lock();
  // Under mpirun rank 0 alone looks at the run folder: only its host needs it.
  const auto has_checkpoint = [&] { return world().broadcast(world().rank() == 0 && fs::exists(ckpt) ? "1" : "0") == "1"; };
  const auto refuse_taken = [&] {
    throw UserError(a.out + " already holds a checkpoint; pass --resume to continue it, or choose another --out");
  };
  const bool exists = has_checkpoint();
  // Where the checkpoints will go: a link or folder there, or a folder not writable, is said
  // now rather than at the first checkpoint.
  if (world().rank() == 0 && fs::is_directory(a.out)) io::check_writable(ckpt);
  if (a.resume && !exists) throw UserError(ckpt + ": no checkpoint to resume from");
  if (!a.resume && exists) refuse_taken();
  std::vector<uint8_t> saved_bytes;  // rank 0's checkpoint, on every rank
  if (a.resume && world().multi()) {
    std::string bytes;
    if (world().rank() == 0) {
      const std::vector<uint8_t> file = io::read_file(ckpt);
      bytes.assign(file.begin(), file.end());
    }
    bytes = world().broadcast(std::move(bytes));
    saved_bytes.assign(bytes.begin(), bytes.end());
  }
  const std::vector<uint8_t>* from = saved_bytes.empty() ? nullptr : &saved_bytes;

  Settings& s = a.s;
  RunStart start = start_run(a, ckpt, from);
  model::Model& m = start.m;
  std::unique_ptr<io::Dataset>& data = start.data;
  std::optional<io::Checkpoint>& resumed = start.resumed;
  const nlohmann::json& saved_plan = start.saved_plan;
  const bool recorded_plan = start.recorded_plan;
  const optim::LrSchedule& schedule = start.schedule;
  const uint32_t states = s.optimizer == "adamw" ? 2 : (s.momentum > 0 ? 1 : 0);

  // The pipeline and its optimizer, rebuilt when a device is lost. The optimizer's state
  // lives on the pipeline's devices: it goes before they do.
  struct Trainer {
    Pipeline p;
    std::unique_ptr<optim::Optimizer> opt;
  };
  auto build = [&](const PipelineFlags& f) {
    auto t = std::make_unique<Trainer>();
    t->p = open_pipeline(m, f, s.batch_size, states);
    t->opt = make_optimizer(s);
    t->p.executor->attach(*t->opt);
    return t;
  };
  std::unique_ptr<Trainer> t;
  try {
    t = build(a.pipeline);
  } catch (const UserError& e) {
    // Flags the user did not give (a device this machine lacks, a plan edited by hand): say
    // where they came from, and how to plan anew. Errors of their own kind (every rank's, a
    // plan over memory) keep it.
    if (!recorded_plan || typeid(e) != typeid(UserError)) throw;
    throw UserError(std::string(e.what()) + " (from the plan " + ckpt + " recorded: pass --plan auto to plan again, or the pipeline flags)");
  }
  s.precision = a.pipeline.precision;  // as given (a plan's choice is in its flags)
  s.micro_batches = t->p.flags.micro_batches;  // as run
  if (t->p.chosen) {
    s.plan = t->p.chosen->record.at("flags");
    // A run resumed on another plan (as brigade supervise's restarts on the ranks that remain
    // are): the history keeps the change.
    if (resumed && !same_plan(s.plan, saved_plan))
      s.plan_history.push_back({{"step", resumed->step + 1}, {"flags", s.plan}});
  }
  uint64_t step = 0;
  // fp16 stages: dynamic loss scaling. The optimizer counts the updates it made, as torch's
  // does when GradScaler skips one.
  bool scaling = scales_loss(t->p.precision);
  optim::LossScale scaler;
  if (resumed) {
    scaler = resumed->loss_scale;
    restore(*resumed, *t->p.executor, *t->opt, ckpt);
    step = resumed->step;
    if (step >= s.steps) throw UserError(ckpt + ": the run already finished (" + std::to_string(step) + " of " +
                                         std::to_string(s.steps) + " steps); give --steps with a later total to train it further");
    if (world().multi()) resumed.reset();  // in one process: what a lost device before the first copy goes back to
  } else {
    if (world().rank() == 0) fs::create_directories(a.out);
    take_lock();
    // Another run may have made the folder, trained and let it go since the check above.
    if (has_checkpoint()) refuse_taken();
    t->p.executor->initialize_parameters(s.seed);
  }

  const uint32_t tps = m.targets_per_sample;
  const uint64_t per_step = uint64_t(s.batch_size) * (m.token_input ? tps : 1);
  const uint64_t per_epoch = data->steps_per_epoch(s.batch_size);
  const std::vector<pipeline::Batch> eval_batches = data->eval_batches(s.batch_size, s.eval_batches);
  // One metrics.jsonl, rank 0's.
  std::optional<io::MetricsFile> metrics_file;
  if (world().rank() == 0) metrics_file.emplace(a.out + "/metrics.jsonl", a.resume, step);
  auto record = [&](const nlohmann::json& j) {
    if (metrics_file) metrics_file->write(j.dump());
  };
  const uint64_t end = a.stop_after && a.stop_after < s.steps - step ? step + a.stop_after : s.steps;

  {
    const Pipeline& p = t->p;
    const PipelineFlags& flags = p.flags;  // as run: --plan auto's choice where it chose
    const pipeline::Executor& ex = *p.executor;
    const std::string ranks = world().multi() ? " (" + std::to_string(world().size()) + " ranks" +
                                                    (flags.replicas > 1 ? ", " + std::to_string(flags.replicas) + " replicas" : "") + ")"
                                              : "";
    std::printf("%s: %s parameters on %u stage(s)%s, %u micro-batches, schedule %s%s, remat %s, precision %s\n",
                m.name.c_str(), std::to_string(m.parameter_count()).c_str(), ex.stages(), ranks.c_str(),
                flags.micro_batches, flags.schedule.c_str(),
                ex.cells() > ex.stages() ? (" (" + std::to_string(ex.cells()) + " cells)").c_str() : "",
                flags.remat.c_str(), precision_words(flags.precision, p.precision).c_str());
    if (p.chosen) std::printf("%s\n%s\n", p.chosen->line.c_str(), p.chosen->profiled.c_str());
    else if (!s.plan.is_null()) std::printf("plan auto, as the run chose%s (the checkpoint's): devices %s, balance %s\n",
                                            s.plan_history.empty() ? " at its start" : " when it last re-planned",
                                            devices_named(p, flags).c_str(), flags.balance.c_str());
    std::printf("%sdata: %s\n", p.link_lines.c_str(), data->describe().c_str());
    if (s.schedule == "constant")
      std::printf("%s, lr %g", s.optimizer.c_str(), s.lr);
    else
      std::printf("%s, lr %g after %llu warmup steps, cosine to %g", s.optimizer.c_str(), s.lr,
                  (unsigned long long)s.warmup, s.min_lr);
    std::printf(", batch %u, %llu steps (%.2f epochs)%s\n", s.batch_size, (unsigned long long)s.steps,
                double(s.steps) / double(per_epoch), a.resume ? (", resuming at step " + std::to_string(step)).c_str() : "");
    std::fflush(stdout);
    record({{"kind", "start"}, {"step", step}, {"stages", ex.stages()},
            {"micro_batches", flags.micro_batches}, {"pipeline_schedule", flags.schedule},
            {"virtual_stages", flags.virtual_stages}, {"remat", flags.remat},
            {"precision", flags.precision},
            {"devices", flags.devices}, {"ranks", world().size()}, {"replicas", flags.replicas},
            {"settings", to_json(s)}});
    if (p.chosen) {
      nlohmann::json j = p.chosen->record;
      j["kind"] = "plan", j["step"] = step;
      record(j);
    }
  }

  const char* split = data->eval_split();
  auto run_eval = [&](uint64_t at) {
    const double t0 = pipeline::now_us();
    const Evaluation e = evaluate(*t->p.executor, eval_batches, tps);
    nlohmann::json j{{"kind", "eval"}, {"step", at}, {"epoch", double(at) / double(per_epoch)},
                     {"split", split}, {"loss", e.loss}};
    if (!m.token_input) j["accuracy"] = e.accuracy;
    record(j);
    std::string line = "eval at step " + std::to_string(at) + ": " + split + " loss " + format_fixed(e.loss, 4);
    if (!m.token_input)
      line += ", accuracy " + format_fixed(e.accuracy, 4) + " (" + std::to_string(e.correct) + "/" +
              std::to_string(e.count) + ")";
    line += " in " + format_duration((pipeline::now_us() - t0) / 1e6);
    return std::make_pair(e, line);
  };

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  // Under mpirun a rank's stdout is a pseudo-terminal whatever mpirun's own is: log lines there.
  // A live line only on a terminal of this process's own: mpirun hands even a lone rank a
  // pseudo-terminal whatever its own output is (a log file, say).
  Progress progress(s.steps, data->unit(), isatty(STDOUT_FILENO) != 0 && !mpi::launched(), a.log_every);
  Evaluation last_eval;
  uint64_t evaluated = step;  // the last step evaluated
  uint64_t last_checkpoint = step;

  // A lost device: in one process the run goes on from the last snapshot (recovery.h); under
  // mpirun a rank cannot leave the job, which stops, and a restart (brigade supervise) goes
  // on from the last snapshot written.
  const bool multi = world().multi();
  const bool elastic = a.on_device_loss == "continue" && !multi;
  SnapshotPolicy policy(a.snapshot_every);
  // In one process: the last snapshot, on the host; until the first, the checkpoint resumed
  // (the initial parameters, of the seed, where the run is new).
  std::optional<io::Checkpoint> snapshot = std::move(resumed);
  resumed.reset();
  uint64_t snapshot_step = step;           // the step of the last snapshot
  bool checkpointed = exists;  // a checkpoint is in --out (on rank 0's host)
  double snapshot_seconds = 0;  // all captures', checkpoints' included
  uint64_t snapshots = 0;
  // A snapshot of the step just completed: a host copy in one process, which `write` also
  // saves as the checkpoint; under mpirun always the checkpoint, where a restart finds it
  // (its seconds then count the gather and the write).
  auto take_snapshot = [&](bool write) {
    const double t0 = pipeline::now_us();
    io::Checkpoint c = capture(m, step, t->p, *t->opt, scaler);
    if (multi) save(ckpt, m, s, c);
    const double seconds = (pipeline::now_us() - t0) / 1e6;
    policy.captured(seconds);
    snapshot_seconds += seconds, ++snapshots;
    if (write && !multi) save(ckpt, m, s, c);
    if (write || multi) last_checkpoint = step, checkpointed = true;
    snapshot_step = step;
    if (!multi) snapshot = std::move(c);
  };
  // Before step 1 (inside the loop, where a lost device is recovered): the evaluation of the
  // initial parameters and, in one process, the first host copy.
  bool first_eval = step == 0, first_copy = !multi;
  uint64_t done_through = step;   // steps whose record, evaluation and checkpoint are done
  uint64_t replay_until = 0;      // steps done before a loss, redone from the snapshot in silence
  std::optional<nlohmann::json> went_on;  // the re-plan, said once the run reaches the lost step
  double lost_at_us = 0;

  // What a failure part-way leaves behind, for its message.
  auto left_behind = [&]() -> std::string {
    if (!checkpointed) return ", before the first checkpoint";
    return ", and the last checkpoint (step " + std::to_string(last_checkpoint) + ") is untouched";
  };
  // Stops for a lost device, after writing the snapshot where it is newer than the checkpoint.
  auto stop_lost = [&](const std::string& why, VkResult result) {
    progress.finish();
    std::string left = left_behind();
    if (snapshot && snapshot->step > last_checkpoint) {
      save(ckpt, m, s, *snapshot);
      checkpointed = true;
      left = "; checkpoint written at step " + std::to_string(snapshot->step) + ", the last one completed";
    }
    throw vk::VulkanError(why + "; stopped at step " + std::to_string(done_through + 1) + left +
                              " (continue with --resume)", result);
  };
  bool stepping = false;  // inside the executor's step, not the evaluation or copy after it
  // In one process with a snapshot: re-plan on the devices that remain, restore, replay.
  auto recover = [&](const vk::VulkanError& e) {
    const std::vector<uint32_t> lost = lost_stages(t->p);
    // Before the first copy of a new run: its initial parameters, which the seed gives again.
    const bool initial = !snapshot && step == 0 && !a.resume;
    if (e.result != VK_ERROR_DEVICE_LOST || lost.empty() || !(snapshot || initial)) stop_lost(e.what(), e.result);
    lost_at_us = pipeline::now_us();
    nlohmann::json names = nlohmann::json::array();
    for (uint32_t k : lost) names.push_back(t->p.devices[k]->label());
    const std::string first = names[0];
    std::string why = e.what();  // "<device>: <file:line>: <call> returned ..."
    if (why.rfind(first + ": ", 0) == 0) why.erase(0, first.size() + 2);
    // In a step, or after one: in its evaluation or its host copy.
    const std::string when = stepping ? "in step " + std::to_string(step + 1) : "after step " + std::to_string(step);
    progress.print("device lost: " + first + (lost.size() > 1 ? " and others" : "") + " " + when + ": " + why);
    if (!elastic) stop_lost(e.what(), e.result);
    const PipelineFlags next = replan_flags(a.pipeline, t->p.flags, lost, t->p.chosen.get());
    if (next.devices.empty()) stop_lost("no device remains to go on with", e.result);
    t.reset();
    try {
      t = build(next);
      if (initial) t->p.executor->initialize_parameters(s.seed);
      else restore(*snapshot, *t->p.executor, *t->opt, "the snapshot of step " + std::to_string(snapshot->step));
    } catch (const vk::VulkanError& again) {
      stop_lost(std::string("another device failed while re-planning: ") + again.what(), again.result);
    } catch (const UserError& none) {
      stop_lost(std::string("no plan fits the devices that remain: ") + none.what(), e.result);
    }
    scaling = scales_loss(t->p.precision);
    replay_until = std::max(replay_until, step);
    const uint64_t back_to = initial ? 0 : snapshot->step;
    scaler = initial ? optim::LossScale{} : snapshot->loss_scale;
    snapshot_step = back_to;
    s.plan = t->p.chosen->record.at("flags");
    s.micro_batches = t->p.flags.micro_batches;
    went_on = {{"kind", "replan"}, {"step", step + 1}, {"lost", names}, {"flags", s.plan},
               {"replayed", replay_until - back_to}, {"line", t->p.chosen->line}};
    s.plan_history.push_back({{"step", step + 1}, {"lost", names}, {"flags", s.plan}});
    step = back_to;
  };

  // The re-plan's line and record, once its replayed steps are done (at the loop's end where
  // the loss came in the run's last step or its copy).
  auto say_went_on = [&] {
    (*went_on)["seconds"] = (pipeline::now_us() - lost_at_us) / 1e6;
    progress.print("going on: " + (*went_on)["line"].get<std::string>() + "; " +
                   std::to_string((*went_on)["replayed"].get<uint64_t>()) + " step(s) replayed; " +
                   format_duration((*went_on)["seconds"]) + " from the loss to this step");
    record(*went_on);
    went_on.reset();
  };
  while (step < end) {
    try {
      if (went_on && step == replay_until) say_went_on();
      if (first_eval) {
        progress.print(run_eval(0).second);
        first_eval = false;
      }
      if (first_copy) {
        take_snapshot(false);
        first_copy = false;
      }
      const pipeline::Batch batch = data->train_batch(step, s.batch_size);
      const double lr = optim::learning_rate(schedule, step);
      const double t0 = pipeline::now_us();
      pipeline::StepResult r;
      stepping = true;
      try {
        pipeline::Update u{t->opt.get(), optim::Step{step + 1 - scaler.skipped_steps, lr, 1}, s.clip,
                           scaling ? scaler.scale : 1.0};
        u.skips = scaling, u.number = step + 1;
        r = t->p.executor->train(batch, u);
      } catch (const pipeline::NonFinite& e) {
        progress.finish();
        throw UserError(std::string(e.what()) + "; stopped" + left_behind());
      }
      const double seconds = (pipeline::now_us() - t0) / 1e6;
      stepping = false;
      ++step;
      if (scaling) scaler.update(r.skipped);
      if (step <= done_through) continue;  // replayed: recorded, evaluated and saved before the loss
      if (step > replay_until) {
        std::vector<double> busy;  // every stage's, from every rank
        for (double b : r.busy_ms) busy.push_back(seconds > 0 ? b / (seconds * 1e3) : 0);
        nlohmann::json j{{"kind", "train"}, {"step", step}, {"epoch", double(step) / double(per_epoch)},
                         {"loss", r.loss}, {"lr", lr}, {std::string(data->unit()) + "_per_s", double(per_step) / seconds},
                         {"elapsed_s", progress.elapsed()}};
        if (scaling) {
          j["loss_scale"] = scaler.scale;
          if (r.skipped) j["skipped"] = true;
        }
        if (!r.skipped) j["grad_norm"] = r.grad_norm;
        record(j);
        progress.step(step, r.loss, per_step, seconds, busy);
      }

      const bool last = step == s.steps;
      const bool interrupted = any(g_signal != 0);  // every rank stops after the same step
      const bool evaluates = step % s.eval_every == 0 || last;
      const bool checkpoint = evaluates || step == end || interrupted;
      if (evaluates && step > evaluated) {  // not again where the step's snapshot failed after it
        auto [e, line] = run_eval(step);
        last_eval = e, evaluated = step;
        progress.print(line);
      }
      const bool due = policy.due(step - snapshot_step, seconds);
      // Under mpirun rank 0's interval rules: its copies also gather and write.
      if (checkpoint || (multi ? world().broadcast(due ? "1" : "0") == "1" : due)) take_snapshot(checkpoint);
      done_through = step;
      if (interrupted) {
        progress.finish();
        throw Interrupted(g_signal ? int(g_signal) : SIGTERM, "stopped by signal " + std::to_string(g_signal ? int(g_signal) : SIGTERM) + " after step " +
                                        std::to_string(step) + "; checkpoint written to " + ckpt +
                                        " (continue with --resume)");
      }
    } catch (const vk::VulkanError& e) {  // a device lost, a submit refused
      recover(e);
    }
  }
  if (went_on) say_went_on();
  progress.finish();
  if (step < s.steps) {
    std::printf("stopped after step %llu of %llu (--stop-after); checkpoint %s; continue with --resume\n",
                (unsigned long long)step, (unsigned long long)s.steps, ckpt.c_str());
    return;
  }
  nlohmann::json j{{"kind", "end"}, {"step", step}, {"split", split}, {"loss", last_eval.loss},
                   {"elapsed_s", progress.elapsed()}, {"snapshots", snapshots}, {"snapshot_s", snapshot_seconds},
                   {"snapshot_every", policy.interval()}};
  if (!m.token_input) j["accuracy"] = last_eval.accuracy;
  if (scaling) j["loss_scale"] = scaler.scale, j["skipped_steps"] = scaler.skipped_steps;
  record(j);
  // After the end record: plots that cannot be written (a full disk) leave a finished run.
  if (world().rank() == 0) {
    try {
      plot_runs({a.out}, {}, "", 20);
    } catch (const UserError& e) {
      std::fprintf(stderr, "brigade: warning: plots not written: %s\n", e.what());
    }
  }
  if (scaling)
    std::printf("fp16 loss scale %.0f at the end; %llu step(s) skipped for overflowing it\n", scaler.scale,
                (unsigned long long)scaler.skipped_steps);
  if (m.token_input)
    std::printf("final %s loss %.4f after %llu steps; checkpoint %s\n", split, last_eval.loss,
                (unsigned long long)step, ckpt.c_str());
  else
    std::printf("final %s accuracy %.4f (%llu/%llu), loss %.4f after %llu steps; checkpoint %s\n", split,
                last_eval.accuracy, (unsigned long long)last_eval.correct, (unsigned long long)last_eval.count,
                last_eval.loss, (unsigned long long)step, ckpt.c_str());
}

}  // namespace

void add_train(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "train a model through the pipeline, with evaluation and checkpoints");
  a->cmd = cmd;
  Settings& s = a->s;
  cmd->add_option("--model", a->model, "preset name or a model .toml file (not with --resume)");
  cmd->add_option("--set", a->set, "override a model setting, e.g. --set n_layer=6 (repeatable)");
  cmd->add_option("--data", a->data,
                  std::string("dataset: Fashion-MNIST's folder (default ") + io::kFashionMnistDir +
                      ") or a text file for GPT models (default " + io::kJargonFile +
                      "); with --resume, where the run's data lives now")
      ->check(path_check("a folder or a file"));
  cmd->add_option("--out", a->out, "run folder: checkpoint.safetensors, metrics.jsonl, plots")
      ->required()
      ->check(path_check("a folder"));
  cmd->add_flag("--resume", a->resume, "continue the run in --out from its checkpoint");
  auto* epochs = cmd->add_option("--epochs", a->epochs, "epochs to train (default: 6 for images)");
  cmd->add_option("--steps", s.steps, "optimizer steps to train (default: 1000 for text); with --resume, a later total trains the run further")->excludes(epochs);
  cmd->add_option("--batch-size,-b", s.batch_size, "samples per mini-batch (default: 64 images, 16 text windows)")
      ->check(kPositive);
  cmd->add_option("--seed", s.seed, "seed of the initial parameters, data order and dropout")
      ->capture_default_str()
      ->check(kNonNegative);
  cmd->add_option("--optimizer", s.optimizer, "adamw or sgd")->capture_default_str();
  cmd->add_option("--lr", s.lr, "peak learning rate")->capture_default_str();
  cmd->add_option("--lr-schedule", s.schedule, "learning rate: constant, or cosine (linear warmup, cosine decay)")->capture_default_str();
  cmd->add_option("--warmup", s.warmup, "warmup steps of the cosine schedule (default for text: 100)");
  cmd->add_option("--min-lr", s.min_lr, "final learning rate of the cosine schedule (default: lr / 10)");
  cmd->add_option("--weight-decay", s.weight_decay, "decoupled weight decay (AdamW) or L2 (SGD); default 0, text 0.1");
  cmd->add_option("--momentum", s.momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--beta1", s.beta1, "AdamW beta1")->capture_default_str();
  cmd->add_option("--beta2", s.beta2, "AdamW beta2 (default 0.999, text 0.99)");
  cmd->add_option("--eps", s.eps, "AdamW epsilon")->capture_default_str();
  cmd->add_option("--clip", s.clip, "clip the global gradient norm to this; 0 = off (default: off, text 1.0)")
      ->check(kNonNegative);
  cmd->add_option("--eval-every", s.eval_every, "steps between evaluations and checkpoints (default: an epoch, text 100)");
  cmd->add_option("--eval-batches", s.eval_batches, "batches per evaluation; 0 = the whole split (default: all, text 16)");
  cmd->add_option("--stop-after", a->stop_after, "stop this run after so many steps, with a checkpoint (resume later); 0: no stop");
  cmd->add_option("--log-every", a->log_every, "steps between log lines when stdout is not a terminal (default: a fortieth of the run, at least 1)");
  cmd->add_option("--on-device-loss", a->on_device_loss,
                  "a lost device: continue (re-plan on the devices that remain, go on from the last snapshot) or stop")
      ->capture_default_str()
      ->check(CLI::IsMember({"continue", "stop"}));
  cmd->add_option("--snapshot-every", a->snapshot_every,
                  "steps between host copies of the parameters and optimizer state a lost device is recovered "
                  "from (default 0: as often as costs under 2% of a step)");
  add_pipeline_flags(*cmd, a->pipeline);
  cmd->callback([a] {
    if (!a->resume && a->model.empty()) throw UserError("--model is required (unless --resume)");
    if (!std::isfinite(a->s.clip)) throw UserError("--clip must be a finite number, 0 (off) or more");
    run_train(*a);
  });
}

}  // namespace brigade::cli
