// The planner's cut under memory caps against every contiguous cut, each laid out whole.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>

#include "model/model.h"
#include "pipeline/plan.h"

namespace pipeline_plan_cut_test {

using namespace brigade;
using namespace brigade::pipeline;

namespace {

// Calls `f` with every way of cutting `layers` layers into `cells` non-empty cells.
void each_cut(uint32_t layers, uint32_t cells, std::vector<uint32_t>& sizes,
              const std::function<void(const std::vector<uint32_t>&)>& f) {
  if (cells == 1) {
    sizes.push_back(layers);
    f(sizes);
    sizes.pop_back();
    return;
  }
  for (uint32_t n = 1; n + cells - 1 <= layers; ++n) {
    sizes.push_back(n);
    each_cut(layers - n, cells - 1, sizes, f);
    sizes.pop_back();
  }
}

struct Cut {
  std::vector<uint32_t> sizes;
  double time = 0;           // the slowest stage's
  std::vector<uint64_t> bytes;  // each stage's plan
  uint64_t fullest = 0;
};

}  // namespace

TEST_CASE("under memory caps the plan's cut is the fastest cut that fits, or where none does the one needing least") {
  // On windows of 8 tokens a GPT's stages are mostly parameters, gradients and optimizer
  // state: the partitioner's floor under a cell's footprint (those alone) is close to it.
  const model::Model m = model::build("gpt-mini", {"n_layer=4", "block_size=8"});
  const uint32_t L = uint32_t(m.layers.size()), K = 3, states = 2;
  for (const Remat remat : {Remat::Always, Remat::Never}) {
    CAPTURE(int(remat));
    PlanOptions o;
    o.rows = 4, o.micro_batches = 2, o.remat = remat, o.optimizer_states = states;
    o.stages.assign(K, StageSpec{});
    std::vector<Cut> cuts;
    std::vector<uint32_t> sizes;
    each_cut(L, K, sizes, [&](const std::vector<uint32_t>& s) {
      o.balance = s;
      const Plan p = plan(m, o);
      Cut c{s, p.partition.max_time, {}, 0};
      for (uint32_t k = 0; k < K; ++k) c.bytes.push_back(total(p.stage_memory(k, states)));
      c.fullest = *std::max_element(c.bytes.begin(), c.bytes.end());
      cuts.push_back(c);
    });
    o.balance.clear();
    uint64_t least = ~uint64_t(0), most = 0;
    for (const Cut& c : cuts) least = std::min(least, c.fullest), most = std::max(most, c.fullest);
    REQUIRE(least < most);
    // Caps from under the least a cut needs to over the most, in 40 steps.
    for (int step = 0; step <= 40; ++step) {
      const uint64_t cap = least - least / 20 + (most - least + least / 20) * step / 40;
      CAPTURE(cap);
      for (StageSpec& st : o.stages) st.memory_cap = cap;
      const Plan p = plan(m, o);
      const Cut* best = nullptr;
      for (const Cut& c : cuts)
        if (c.fullest <= cap && (!best || c.time < best->time)) best = &c;
      uint64_t fullest = 0;
      for (uint32_t k = 0; k < K; ++k) fullest = std::max(fullest, total(p.stage_memory(k, states)));
      if (best) {
        CHECK(p.problem.empty());
        CHECK(fullest <= cap);
        CHECK(p.partition.max_time == doctest::Approx(best->time).epsilon(1e-12));
      } else {
        CHECK(!p.problem.empty());
        CHECK(fullest == least);
      }
    }
  }
}

}  // namespace pipeline_plan_cut_test
