// Every schedule keeps GPipe's promise: 1f1b, interleaved virtual stages and zero-bubble
// reorder (and split) the same passes, so at K in {2, 3, 4} and M in {1, 2, 4, 8} (uneven
// micro-batches included), in every remat mode and over every link path, the loss and every
// gradient equal the one-device, one-batch run, and so do the parameters after three AdamW
// steps with clipping. Also: each stage's measured memory equals the plan's for every
// schedule, and the schedules that promise less memory hold less.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "equivalence.h"
#include "gpu.h"
#include "model/model.h"
#include "pipeline/executor.h"
#include "pipeline/plan.h"

namespace pipeline_schedules_test {

using namespace brigade;
using pipeline::ScheduleKind;
using pipeline::LinkKind;
using pipeline::Remat;
using pipeline::random_batch;
using test::check_equal, test::Outcome, test::PipelineConfig;

namespace {

struct Run {
  uint32_t K = 1;
  PipelineConfig c;
};

std::string describe(const Run& r) { return "K=" + std::to_string(r.K) + " " + test::describe(r.c); }

std::vector<vk::Device*> devices(test::Gpu& gpu, uint32_t K) {
  std::vector<vk::Device*> out;
  for (uint32_t k = 0; k < K; ++k) out.push_back(&gpu.device(k));
  return out;
}

// The runs of one schedule: K in {2, 3, 4} with M in {1, 2, 4, 8} (M = 2 at K = 2; interleaved: the
// multiples of K there are, with V = 2, and V = 3 once), the remat modes and link paths in
// turn, so each schedule meets every mode and path. Cells must not outnumber layers.
std::vector<Run> runs(ScheduleKind kind, uint32_t layers) {
  const Remat modes[] = {Remat::Never, Remat::Always, Remat::ExceptLast};
  const LinkKind links[] = {LinkKind::Auto, LinkKind::Fd, LinkKind::Host, LinkKind::Staging};
  std::vector<Run> out;
  size_t j = 0;
  // Interleaved on one stage too: its cells' boundaries are local, nothing moves.
  for (uint32_t K : kind == ScheduleKind::Interleaved ? std::vector<uint32_t>{1, 2, 3, 4} : std::vector<uint32_t>{2, 3, 4}) {
    // M = 2 at K = 2 only (CI time): an even split, as M = 4 and 8 of 10 rows are not.
    std::vector<uint32_t> ms = K == 2 ? std::vector<uint32_t>{1, 2, 4, 8} : std::vector<uint32_t>{1, 4, 8};
    if (kind == ScheduleKind::Interleaved) ms = K == 3 ? std::vector<uint32_t>{3, 6} : std::vector<uint32_t>{K, 2 * K};
    for (uint32_t M : ms) {
      const uint32_t V = kind == ScheduleKind::Interleaved ? (K == 2 && M == 2 && layers >= 6 ? 3 : 2) : 1;
      if (K * V > layers) continue;
      out.push_back({K, {M, modes[j % 3], links[j % 4], kind, V}});
      ++j;
    }
  }
  return out;
}

void check_schedule(test::Gpu& gpu, const model::Model& m, ScheduleKind kind, uint32_t rows) {
  const std::vector<pipeline::Batch> batches{random_batch(m, rows, 1), random_batch(m, rows, 2),
                                             random_batch(m, rows, 3)};
  const Outcome reference = test::run(m, devices(gpu, 1), {}, batches, 0);
  REQUIRE(std::isfinite(reference.loss));
  const std::vector<Run> all = runs(kind, uint32_t(m.layers.size()));
  REQUIRE(all.size() >= 3);
  for (const Run& r : all)
    check_equal(test::run(m, devices(gpu, r.K), r.c, batches, 0), reference, m.name + " " + describe(r), false);

  // Three AdamW steps with global clipping on a pipelined run with uneven micro-batches.
  // AdamW divides each gradient by its own running magnitude, so the rounding of sums over
  // micro-batches rather than the whole batch reaches a parameter whose gradient is near
  // AdamW's eps barely damped (gpt-mini: 2e-7 on a c_proj.bias element): parameters agree to
  // a thousandth of the steps' largest move (3 steps of lr 1e-3), as in tests/vendors; a
  // wrong schedule is off by whole steps.
  const Outcome trained = test::run(m, devices(gpu, 1), {}, batches, 3, test::Update::AdamW);
  const Run& r = all[all.size() / 2];
  check_equal(test::run(m, devices(gpu, r.K), r.c, batches, 3, test::Update::AdamW), trained,
              m.name + " 3 AdamW steps " + describe(r), true, 3e-6);
  // The same with SGD, whose steps scale with the clipped gradients: a global norm summed
  // wrong (one stage's, or before a zero-bubble W pass ends) moves every parameter by its
  // share of the difference, which AdamW's m / sqrt(v) all but cancels.
  const Outcome sgd = test::run(m, devices(gpu, 1), {}, batches, 3, test::Update::Sgd);
  check_equal(test::run(m, devices(gpu, r.K), r.c, batches, 3, test::Update::Sgd), sgd,
              m.name + " 3 SGD steps " + describe(r), true, 1e-6);

  // Evaluation runs the forwards in the schedule's order.
  const test::Evaluation want = test::evaluate(m, devices(gpu, 1), {}, batches[0]);
  check_equal(test::evaluate(m, devices(gpu, all.back().K), all.back().c, batches[0]), want,
              m.name + " evaluation " + describe(all.back()));
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "fashion-mlp pipelined equals one device under the 1f1b schedule") {
  check_schedule(*this, model::build("fashion-mlp"), ScheduleKind::OneFOneB, 10);
}
TEST_CASE_FIXTURE(test::Gpu, "fashion-mlp pipelined equals one device under the zb schedule") {
  check_schedule(*this, model::build("fashion-mlp"), ScheduleKind::ZeroBubble, 10);
}
TEST_CASE_FIXTURE(test::Gpu, "fashion-mlp pipelined equals one device under the interleaved schedule") {
  check_schedule(*this, model::build("fashion-mlp"), ScheduleKind::Interleaved, 12);
}
TEST_CASE_FIXTURE(test::Gpu, "fashion-cnn pipelined equals one device under the 1f1b schedule") {
  check_schedule(*this, model::build("fashion-cnn"), ScheduleKind::OneFOneB, 10);
}
TEST_CASE_FIXTURE(test::Gpu, "fashion-cnn pipelined equals one device under the zb schedule") {
  check_schedule(*this, model::build("fashion-cnn"), ScheduleKind::ZeroBubble, 10);
}
TEST_CASE_FIXTURE(test::Gpu, "fashion-cnn pipelined equals one device under the interleaved schedule") {
  check_schedule(*this, model::build("fashion-cnn"), ScheduleKind::Interleaved, 12);
}
// gpt-mini on 16-token windows: the same layers and tied embedding at an eighth of the cost.
TEST_CASE_FIXTURE(test::Gpu, "gpt-mini pipelined equals one device under the 1f1b schedule") {
  check_schedule(*this, model::with_window(model::build("gpt-mini"), 16), ScheduleKind::OneFOneB, 8);
}
TEST_CASE_FIXTURE(test::Gpu, "gpt-mini pipelined equals one device under the zb schedule") {
  check_schedule(*this, model::with_window(model::build("gpt-mini"), 16), ScheduleKind::ZeroBubble, 8);
}
TEST_CASE_FIXTURE(test::Gpu, "gpt-mini pipelined equals one device under the interleaved schedule") {
  check_schedule(*this, model::with_window(model::build("gpt-mini"), 16), ScheduleKind::Interleaved, 12);
}

TEST_CASE_FIXTURE(test::Gpu, "each schedule's measured memory is the plan's, and 1f1b and zb hold fewer activations than gpipe") {
  const model::Model m = model::build("fashion-cnn");
  const uint32_t N = 16, K = 4, M = 8;
  const pipeline::Batch batch = random_batch(m, N, 9);
  std::map<ScheduleKind, std::vector<uint64_t>> activations;  // per stage
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::ZeroBubble, ScheduleKind::Interleaved})
    for (Remat r : {Remat::Never, Remat::Always}) {
      const PipelineConfig c{M, r, LinkKind::Auto, kind, kind == ScheduleKind::Interleaved ? 2u : 1u};
      const pipeline::Plan plan = test::make_plan(m, K, c, N, 0);
      std::vector<vk::Device*> devs = devices(*this, K);
      CAPTURE(test::describe(c));
      for (vk::Device* d : devs) {
        REQUIRE(d->memory().stats().current[int(vk::Category::Activations)] == 0);
      }
      {
        pipeline::Executor ex(m, devs, plan, {LinkKind::Auto, 2});
        // The step's peak: on a device whose memory the host cannot map, setting the
        // parameters went through staging copies, which the step does not hold.
        for (vk::Device* d : devs) d->memory().reset_peaks();
        ex.train(batch);
      }
      for (uint32_t k = 0; k < K; ++k) {
        const vk::MemoryStats st = devs[k]->memory().stats();
        const pipeline::Bytes want = plan.stage_memory(k, 0);
        for (vk::Category cat : {vk::Category::Activations, vk::Category::Parameters, vk::Category::Gradients,
                                 vk::Category::Transfer, vk::Category::Scratch})
          CHECK_MESSAGE(st.peak[int(cat)] == want[int(cat)], "K=4 ", test::describe(c), " stage ", k, " ",
                        std::string(vk::category_name(cat)), ": measured ", st.peak[int(cat)], " planned ", want[int(cat)]);
        if (r == Remat::Never) activations[kind].push_back(st.peak[int(vk::Category::Activations)]);
      }
    }
  const auto peak = [&](ScheduleKind kind) { return *std::max_element(activations[kind].begin(), activations[kind].end()); };
  for (uint32_t k = 0; k < K; ++k) {
    CAPTURE(k);
    CHECK(activations[ScheduleKind::OneFOneB][k] < activations[ScheduleKind::GPipe][k]);  // K - k micro-batches, not M
    CHECK(activations[ScheduleKind::ZeroBubble][k] < activations[ScheduleKind::GPipe][k]);
  }
  // 1f1b's later stages hold fewer micro-batches than its first.
  CHECK(activations[ScheduleKind::OneFOneB][K - 1] < activations[ScheduleKind::OneFOneB][0]);
  // zb holds K micro-batches on every stage, 1f1b's first stage's count, and what B keeps for
  // W on top: at most 1f1b's peak plus k + 1 micro-batches of deferred gradients.
  CHECK(peak(ScheduleKind::ZeroBubble) < peak(ScheduleKind::GPipe));

  // Three cells on one stage: local links, one copy of each slot, as planned.
  const PipelineConfig one{M, Remat::Never, LinkKind::Auto, ScheduleKind::Interleaved, 3};
  const pipeline::Plan plan = test::make_plan(m, 1, one, N, 0);
  vk::Device& d = device(4);
  {
    pipeline::Executor ex(m, {&d}, plan, {LinkKind::Auto, 2});
    d.memory().reset_peaks();  // after the parameters' staging copies, as above
    CHECK(ex.link_kind(0) == LinkKind::Local);
    ex.train(batch);
  }
  const pipeline::Bytes want = plan.stage_memory(0, 0);
  for (vk::Category cat : {vk::Category::Activations, vk::Category::Transfer})
    CHECK_MESSAGE(d.memory().stats().peak[int(cat)] == want[int(cat)], "K=1 V=3 ", std::string(vk::category_name(cat)));
}

}  // namespace pipeline_schedules_test
