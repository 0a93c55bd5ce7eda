// `brigade train`'s start (train_start.h): the settings, model and data of a run, new or
// resumed, each checked before any device opens.
#include "train_start.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <tuple>

#include "optim/adamw.h"
#include "optim/sgd.h"
#include "pipeline/partition.h"
#include "pipeline/schedule.h"
#include "ranks.h"
#include "util/error.h"

namespace brigade::cli {

namespace {



// Defaults that depend on the model: images train for epochs, text for steps with warmup
// (nanoGPT's recipe for its character models); both decay the rate along a cosine.
void fill_defaults(TrainArgs& a, const model::Model& m, io::Dataset& data) {
  Settings& s = a.s;
  const bool text = m.token_input;
  if (!given(a, "--batch-size")) s.batch_size = text ? 16 : 64;
  const uint64_t per_epoch = data.steps_per_epoch(s.batch_size);
  if (given(a, "--epochs")) {
    if (a.epochs > std::numeric_limits<uint64_t>::max() / per_epoch)
      throw UserError("--epochs " + std::to_string(a.epochs) + " is more steps than a run can count");
    s.steps = a.epochs * per_epoch;
  }
  else if (!given(a, "--steps")) s.steps = text ? 1000 : 6 * per_epoch;
  if (s.steps == 0) throw UserError("--steps/--epochs: nothing to train (0 steps)");
  s.decay_steps = s.steps;
  if (!given(a, "--weight-decay")) s.weight_decay = text ? 0.1 : 0.0;
  if (!given(a, "--beta2") && text) s.beta2 = 0.99;
  if (!given(a, "--warmup") && text) s.warmup = std::min<uint64_t>(100, s.steps / 10);
  if (!given(a, "--min-lr") && s.schedule == "cosine") s.min_lr = s.lr / 10;
  if (!given(a, "--clip") && text) s.clip = 1.0;
  if (!given(a, "--eval-every")) s.eval_every = text ? std::min<uint64_t>(100, s.steps) : per_epoch;
  if (!given(a, "--eval-batches") && text) s.eval_batches = 16;
  if (s.eval_every == 0) throw UserError("--eval-every must be at least 1");
}

// --data as the checkpoint keeps it: absolute, so that eval and --resume from another folder
// read the same data ("" is the model's default).
std::string data_path(const std::string& given) {
  return given.empty() ? given : std::filesystem::absolute(given).lexically_normal().string();
}

// Flags the chosen optimizer or schedule would not read: refused, rather than saved unread
// (and held, on --resume, to what the optimizer that does read them takes).
void refuse_unread(const TrainArgs& a) {
  const Settings& s = a.s;
  const std::string by_optimizer = "--optimizer " + s.optimizer, constant = "--lr-schedule constant";
  for (const auto& [flag, unread, by] :
       {std::tuple{"--momentum", s.optimizer == "adamw", by_optimizer}, {"--beta1", s.optimizer == "sgd", by_optimizer},
        {"--beta2", s.optimizer == "sgd", by_optimizer}, {"--eps", s.optimizer == "sgd", by_optimizer},
        {"--warmup", s.schedule == "constant", constant}, {"--min-lr", s.schedule == "constant", constant}})
    if (unread && given(a, flag)) throw UserError(std::string(flag) + ": " + by + " does not use it; drop the flag");
}

// --steps or --epochs with --resume: the run's new total, past the step it is at (its
// schedule's steps stay those it started with; past them the rate is min_lr).
void extend(TrainArgs& a, io::Dataset& data, uint64_t at, uint64_t steps) {
  Settings& s = a.s;
  const bool epochs = given(a, "--epochs");
  if (!epochs && !given(a, "--steps")) return;
  const uint64_t per_epoch = data.steps_per_epoch(s.batch_size);
  if (epochs && a.epochs > std::numeric_limits<uint64_t>::max() / per_epoch)
    throw UserError("--epochs " + std::to_string(a.epochs) + " is more steps than a run can count");
  const uint64_t total = epochs ? a.epochs * per_epoch : steps;
  const std::string flag = epochs ? "--epochs " + std::to_string(a.epochs) : "--steps " + std::to_string(total);
  if (total <= at)
    throw UserError(flag + ": the run is at step " + std::to_string(at) + " already; give a later total to train it further");
  if (total < s.steps)  // its schedule would stop short of min_lr
    throw UserError(flag + ": the run trains to step " + std::to_string(s.steps) + "; --resume takes a later total to "
                    "train it further (--stop-after stops it sooner)");
  if (total > s.steps && s.schedule == "cosine" && total > s.decay_steps)
    std::printf("%s: the run goes on to step %llu; its learning rate decays over the %llu steps it started with, "
                "then stays at min_lr %g\n", flag.c_str(), (unsigned long long)total, (unsigned long long)s.decay_steps,
                s.min_lr);
  s.steps = total;
}

optim::LrSchedule lr_schedule(const Settings& s) {
  if (s.schedule == "constant") return optim::constant(s.lr);
  if (s.schedule == "cosine") return optim::warmup_cosine(s.lr, s.min_lr, s.warmup, s.decay_steps);
  throw UserError("--lr-schedule: '" + s.schedule + "' is not constant or cosine");
}

}  // namespace

bool given(const TrainArgs& a, const char* flag) { return a.cmd->count(flag) > 0; }

bool statistics_per_micro_batch(const model::Model& m) {
  return std::any_of(m.layers.begin(), m.layers.end(), [](const auto& l) { return l->kind() == "batchnorm2d"; });
}

std::unique_ptr<optim::Optimizer> make_optimizer(const Settings& s) {
  if (s.optimizer == "adamw") {
    optim::AdamWOptions o{s.beta1, s.beta2, s.eps, s.weight_decay};
    optim::validate(o);
    return std::make_unique<optim::AdamW>(o);
  }
  if (s.optimizer == "sgd") {
    optim::SgdOptions o{s.momentum, s.weight_decay, false};
    optim::validate(o);
    return std::make_unique<optim::Sgd>(o);
  }
  throw UserError("--optimizer: '" + s.optimizer + "' is not adamw or sgd");
}

RunStart start_run(TrainArgs& a, const std::string& ckpt, const std::vector<uint8_t>* from) {
  RunStart r;
  std::optional<io::Checkpoint>& resumed = r.resumed;
  nlohmann::json& saved_plan = r.saved_plan;
  bool& recorded_plan = r.recorded_plan;
  std::unique_ptr<io::Dataset>& data = r.data;
  model::Model& m = r.m;
  Settings& s = a.s;
  pipeline::parse_schedule_kind(a.pipeline.schedule);  // a misspelt schedule: said before any data is read
  if (!a.resume) make_optimizer(s);  // so is an unknown optimizer or a bad option of it (the defaults filled later are valid)
  if (a.resume) {
    const Settings saved = settings_from_json(nlohmann::json::parse(io::checkpoint_config(ckpt, from), nullptr, false), ckpt);
    saved_plan = saved.plan;
    for (const std::string& flag : setting_flags())
      if (flag != "--data" && flag != "--steps" && flag != "--epochs" && given(a, flag.c_str()))
        throw UserError(std::string(flag) + ": a resumed run keeps the settings it started with (see " +
                        ckpt + "); drop the flag");
    const uint64_t steps = s.steps;  // --steps as given
    s = saved;
    if (given(a, "--data")) s.data = data_path(a.data);  // the same data moved: where it lives now
    // A run --plan auto planned goes on with the plan it chose, unless the command line sets
    // the pipeline itself or gives --plan (then --plan auto searches again around the flags
    // given). --link only says how the plan's boundaries travel.
    const bool sets_pipeline =
        given(a, "--plan") || std::any_of(a.pipeline.options.begin(), a.pipeline.options.end(), [](const auto& o) {
          return o.first != "--link" && o.second->count() > 0;
        });
    if (sets_pipeline) s.plan = nullptr;
    m = model::build_from_toml(s.model_toml, ckpt + " (config)", {}, s.model);
    if (!s.plan.is_null()) {
      const PipelineFlags recorded = recorded_flags(a.pipeline, s.plan, ckpt);
      // A plan cut by a build whose layers were others (a GPT block was one layer before it
      // was two) cannot be cut the same way: --plan auto chooses again.
      uint32_t layers = 0;
      for (uint32_t n : pipeline::parse_balance(recorded.balance)) layers += n;
      if (layers == m.layers.size()) {
        a.pipeline = recorded;
        recorded_plan = true;
      } else {
        std::printf("the checkpoint's plan cuts %s into %u layers, where this build makes %zu: planning again "
                    "(--plan auto)\n", m.name.c_str(), layers, m.layers.size());
        a.pipeline.plan = "auto";
      }
    }
    // The precision the run trained in, unless --precision or the plan going on says one.
    const std::string trained_in = trained_precision(saved);
    if (!recorded_plan && !given(a, "--precision") && !trained_in.empty() && trained_in != a.pipeline.precision) {
      if (trained_in.find(',') == std::string::npos)
        a.pipeline.precision = trained_in;
      else
        std::printf("the run trained in --precision %s, one per stage; this run's stages take %s unless "
                    "--precision says otherwise\n", trained_in.c_str(), a.pipeline.precision.c_str());
    }
    // BatchNorm's statistics are each micro-batch's: the run's micro-batches are kept, unless
    // given, also where --plan auto plans again (a recorded plan going on has its own, the
    // run's since its last re-plan).
    if (statistics_per_micro_batch(m) && saved.micro_batches && !given(a, "--micro-batches") && !recorded_plan) {
      if (saved.micro_batches != a.pipeline.micro_batches)
        std::printf("the run trained in %u micro-batches, on which %s's BatchNorm statistics depend: kept "
                    "(--micro-batches to change them)\n", saved.micro_batches, m.name.c_str());
      a.pipeline.micro_batches = saved.micro_batches;
      a.pipeline.fixed["--micro-batches"] = true;
    }
    resumed = io::read_checkpoint(ckpt, m, from);
    data = io::open_dataset(m, s.data, s.seed);
    extend(a, *data, resumed->step, steps);
  } else {
    m = model::build(a.model, a.set);
    s.model = a.model, s.model_toml = m.config, s.data = data_path(a.data);
    data = io::open_dataset(m, s.data, s.seed);
    fill_defaults(a, m, *data);
    refuse_unread(a);
  }
  const std::string data_checksum = data->checksum();
  agree("the data", data->describe() + ", CRC-32 " + data_checksum);  // the program and command line: main.cpp
  if (resumed && !s.data_checksum.empty() && s.data_checksum != data_checksum)
    std::fprintf(stderr,
                 "brigade: warning: %s is not the data the run trained on (CRC-32 %s then, %s now): from step "
                 "%llu on its batches are not those the run would have read\n",
                 data->describe().c_str(), s.data_checksum.c_str(), data_checksum.c_str(),
                 (unsigned long long)resumed->step + 1);
  s.data_checksum = data_checksum;
  r.schedule = lr_schedule(s);
  optim::validate(r.schedule);
  {  // as a --resume will read them back
    Settings saved = s;
    saved.precision = a.pipeline.precision;
    settings_from_json(to_json(saved), "the settings of this run");
  }
  return r;
}

}  // namespace brigade::cli
