// Record once, replay (ExecutorOptions::replay, vk::Commands::set_replay): a training run
// whose actions submit their last recording again trains bit for bit as one that records
// every action every step, across what changes a recording between steps: a link slot taken
// in another turn (M = 3 over 2 slots), the loss scale, the optimizer's step, an evaluation
// on the same command buffers, a smaller last batch. And it does replay.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "equivalence.h"
#include "gpu.h"
#include "model/model.h"
#include "optim/adamw.h"
#include "pipeline/executor.h"

namespace pipeline_replay_test {

using namespace brigade;

namespace {

struct Outcome {
  std::vector<double> losses, evaluations;
  std::map<std::string, std::vector<float>> params;
  std::vector<uint32_t> submissions, replayed;  // per step
};

Outcome train(test::Gpu& gpu, const model::Model& m, const test::PipelineConfig& c, bool replay) {
  const uint32_t rows = 9;
  const std::vector<pipeline::Batch> batches{pipeline::random_batch(m, rows, 1), pipeline::random_batch(m, rows, 2),
                                             pipeline::random_batch(m, rows - 2, 3)};
  std::vector<vk::Device*> devices{&gpu.device(0), &gpu.device(1)};
  const pipeline::Plan plan = test::make_plan(m, 2, c, rows, 2, devices);
  pipeline::ExecutorOptions o{c.link, 2};
  o.replay = replay;
  pipeline::Executor ex(m, devices, plan, o);
  ex.initialize_parameters(7);
  optim::AdamW adamw(optim::AdamWOptions{.eps = 1e-6, .weight_decay = 0.1});
  ex.attach(adamw);
  Outcome out;
  const double scales[] = {1024, 1024, 1024, 512, 512, 512};
  for (uint32_t s = 0; s < 6; ++s) {
    pipeline::Update u{&adamw, optim::Step{s + 1, 1e-3, 1}, 0.5};
    u.loss_scale = c.precision.empty() ? 1 : scales[s];
    const pipeline::StepResult r = ex.train(batches[s == 5 ? 2 : s % 2], u);
    out.losses.push_back(r.loss);
    const pipeline::TraceSummary t = r.trace.summary();
    out.submissions.push_back(t.submissions), out.replayed.push_back(t.replayed);
    if (s == 2) out.evaluations.push_back(ex.evaluate(batches[0]).loss);
  }
  for (const model::ParamSpec& p : m.params())
    if (p.kind != model::ParamKind::State) out.params[p.name] = ex.parameter(p.name);
  return out;
}

void check_replay(test::Gpu& gpu, const test::PipelineConfig& c) {
  const model::Model m = model::with_window(model::build("gpt-mini"), 16);
  const Outcome replayed = train(gpu, m, c, true), recorded = train(gpu, m, c, false);
  for (uint32_t r : recorded.replayed) CHECK(r == 0);
  // Steps 0 and 2 start their transfers in the same turn of the slots (3 micro-batches, 2
  // slots): step 2 submits again every recording of step 0 but the optimizer's step, one per
  // stage. Step 1 is in the other turn, the first of its kind; so are steps 3 and 4, after the
  // evaluation's transfers, at another loss scale with fp16. Step 5, in step 3's turn, has
  // micro-batches of other sizes.
  CHECK(replayed.replayed[0] == 0);
  CHECK(replayed.replayed[1] == 0);
  CHECK(replayed.replayed[2] == replayed.submissions[2] - 2);
  CHECK(replayed.losses == recorded.losses);
  CHECK(replayed.evaluations == recorded.evaluations);
  for (const auto& kv : recorded.params) CHECK_MESSAGE(replayed.params.at(kv.first) == kv.second, kv.first);
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "replayed steps train bit for bit as steps recorded anew: gpipe, fp16 boundaries, loss scale") {
  test::PipelineConfig c;
  c.M = 3, c.precision = {ops::Precision::Fp16};
  check_replay(*this, c);
}

TEST_CASE_FIXTURE(test::Gpu, "replayed steps train bit for bit as steps recorded anew: zero-bubble, re-materialized") {
  test::PipelineConfig c;
  c.M = 3, c.schedule = pipeline::ScheduleKind::ZeroBubble, c.remat = pipeline::Remat::Always;
  check_replay(*this, c);
}

}  // namespace pipeline_replay_test
