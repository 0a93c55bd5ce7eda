// A pipeline planned for forward passes only (evaluation, generation) holds what a forward
// needs: no gradients, optimizer state, gradient buffers or gradient links, one micro-batch's
// activations at a time, and of those a layer's output only until the next layer has read it
// and its saved tensors only during its own forward. Its measured memory is its plan's, it
// evaluates to the same bits as a training plan, and its refusals name only what shrinks a
// forward.
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "equivalence.h"
#include "gpu.h"
#include "model/model.h"
#include "pipeline/executor.h"
#include "pipeline/plan.h"

namespace pipeline_inference_test {

using namespace brigade;
using pipeline::random_batch;
using test::PipelineConfig;
using vk::Category;

namespace {

struct Case {
  std::string what;
  std::function<model::Model()> build;
  uint32_t K = 1;
  PipelineConfig c;
};

std::vector<Case> cases() {
  const auto gpt = [] { return model::with_window(model::build("gpt-mini", {"n_layer=2"}), 16); };
  const auto preset = [](const char* name) { return [name] { return model::build(name); }; };
  std::vector<Case> out;
  out.push_back({"fashion-mlp K=1", preset("fashion-mlp"), 1, {}});
  out.push_back({"gpt-mini K=1", gpt, 1, {}});
  out.push_back({"fashion-cnn-bn K=2", preset("fashion-cnn-bn"), 2, {4}});
  out.push_back({"gpt-mini K=2 bf16", gpt, 2, {2, pipeline::Remat::Never, pipeline::LinkKind::Auto,
                                               pipeline::ScheduleKind::GPipe, 1, {ops::Precision::Bf16}}});
  out.push_back({"gpt-mini K=2 fp16 interleaved", gpt, 2,
                 {2, pipeline::Remat::Never, pipeline::LinkKind::Auto, pipeline::ScheduleKind::Interleaved, 2,
                  {ops::Precision::Fp16}}});
  return out;
}

uint64_t of(const pipeline::Bytes& b, Category c) { return b[int(c)]; }

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "a forward-only plan holds no gradients and one micro-batch's activations, as measured, and evaluates to a training plan's bits") {
  const uint32_t N = 8;
  for (const Case& k : cases()) {
    CAPTURE(k.what);
    const model::Model m = k.build();
    std::vector<vk::Device*> devs;
    for (uint32_t s = 0; s < k.K; ++s) devs.push_back(&device(s));
    const pipeline::Batch b = random_batch(m, N, 5);
    const pipeline::Plan training = test::make_plan(m, k.K, k.c, N, 0, devs);
    PipelineConfig fc = k.c;
    fc.forward_only = true;
    const pipeline::Plan forward = test::make_plan(m, k.K, fc, N, 0, devs);
    REQUIRE(forward.problem.empty());
    CHECK_FALSE(forward.schedule.training);
    for (uint32_t s = 0; s < k.K; ++s) {
      CAPTURE(s);
      const pipeline::Bytes f = forward.stage_memory(s, 2), t = training.stage_memory(s, 2);
      CHECK(of(f, Category::Gradients) == 0);
      CHECK(of(f, Category::Optimizer) == 0);  // whatever an optimizer would keep
      CHECK(of(f, Category::Parameters) == of(t, Category::Parameters));
      CHECK(of(f, Category::Activations) < of(t, Category::Activations));
      if (k.K > 1) CHECK(of(f, Category::Transfer) < of(t, Category::Transfer));  // no gradients' slots
    }
    // The layers' scratch, each for its forward alone: none for a Linear, a GPT block's branch
    // output and attention part; a convolution's columns as in training.
    for (size_t c = 0; c < forward.cells.size(); ++c) {
      CAPTURE(c);
      const uint64_t f = forward.cells[c].scratch_bytes, t = training.cells[c].scratch_bytes;
      if (k.what.starts_with("fashion-cnn")) CHECK(f <= t);
      else CHECK(f < t);
    }
    // Bits as a training plan's evaluation gives them.
    test::Evaluation want, got;
    {
      pipeline::Executor ex(m, devs, training, {k.c.link, 2});
      ex.initialize_parameters(7);
      want.result = ex.evaluate(b, &want.logits);
    }
    for (vk::Device* d : devs) REQUIRE(d->memory().stats().current[int(Category::Activations)] == 0);
    {
      pipeline::Executor ex(m, devs, forward, {k.c.link, 2});
      ex.initialize_parameters(7);
      for (vk::Device* d : devs) d->memory().reset_peaks();  // after the parameters' copies
      got.result = ex.evaluate(b, &got.logits);
      ex.evaluate(b);  // again, on the same buffers
    }
    CHECK(got.logits == want.logits);
    CHECK(got.result.loss == want.result.loss);
    CHECK(got.result.correct == want.result.correct);
    for (uint32_t s = 0; s < k.K; ++s) {
      const vk::MemoryStats st = devs[s]->memory().stats();
      const pipeline::Bytes plan = forward.stage_memory(s, 0);
      // Where the host does not map the device's memory, the plan holds the largest staging
      // buffer a copy may take; the outputs' downloads take one of their own size.
      const uint64_t staging = forward.cells[s].staging_bytes;
      for (int cat = 0; cat < vk::kCategories; ++cat) {
        const uint64_t least = plan[cat] - (Category(cat) == Category::Transfer ? staging : 0);
        CHECK_MESSAGE((st.peak[cat] <= plan[cat] && st.peak[cat] >= least), "stage ", s, " ",
                      vk::category_name(Category(cat)), ": measured ", st.peak[cat], ", planned ", plan[cat]);
      }
    }
  }
}

TEST_CASE("a forward-only plan over its cap names what shrinks a forward, and one of one sample only more stages") {
  const model::Model m = model::with_window(model::build("gpt-mini"), 32);
  pipeline::PlanOptions o;
  o.stages.assign(1, pipeline::StageSpec{});
  o.stages[0].memory_cap = 64 << 10;
  o.training = false;
  o.rows = 1;  // a sample's one sequence
  const std::string one = pipeline::plan(m, o).problem;
  INFO(one);
  CHECK(one.find("`memory_cap`") != std::string::npos);
  CHECK(one.ends_with("; add stages (`devices`)"));
  o.rows = 8;  // an evaluation's batch
  const std::string batch = pipeline::plan(m, o).problem;
  INFO(batch);
  CHECK(batch.find("add stages (`devices`), use more micro-batches (`micro_batches`), or a smaller batch (`rows`)") !=
        std::string::npos);
  for (const std::string& p : {one, batch}) {
    CHECK(p.find("remat") == std::string::npos);  // a forward recomputes nothing
    CHECK(p.find("schedule") == std::string::npos);
  }
  o.micro_batches = 8;  // micro-batches of one sample
  const std::string each = pipeline::plan(m, o).problem;
  INFO(each);
  CHECK(each.find("add stages (`devices`) or a smaller batch (`rows`)") != std::string::npos);
  // Training is told what shrinks training.
  o.training = true;
  const std::string train = pipeline::plan(m, o).problem;
  INFO(train);
  CHECK(train.find("use `remat` always or `schedule` 1f1b") != std::string::npos);
}

}  // namespace pipeline_inference_test
