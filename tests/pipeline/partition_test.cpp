#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <limits>

#include "pipeline/partition.h"
#include "pipeline/schedule.h"
#include "util/error.h"

namespace pipeline_partition_test {

using namespace brigade;
using namespace brigade::pipeline;

namespace {
std::vector<LayerCost> costs(std::initializer_list<double> times) {
  std::vector<LayerCost> v;
  for (double t : times) v.push_back({t, uint64_t(t * 100)});
  return v;
}

// Every contiguous partition, for comparison with the dynamic programme.
double brute_force_best(const std::vector<LayerCost>& layers, const std::vector<StageSpec>& stages) {
  double best = std::numeric_limits<double>::infinity();
  std::vector<uint32_t> sizes(stages.size());
  std::function<void(size_t, uint32_t)> go = [&](size_t k, uint32_t used) {
    if (k + 1 == stages.size()) {
      if (used >= layers.size()) return;
      sizes[k] = uint32_t(layers.size() - used);
      const Partition p = balance_manual(layers, stages, sizes);
      for (size_t s = 0; s < stages.size(); ++s)
        if (stages[s].memory_cap && p.stage_memory[s] > stages[s].memory_cap) return;
      best = std::min(best, p.max_time);
      return;
    }
    for (uint32_t n = 1; used + n < layers.size(); ++n) sizes[k] = n, go(k + 1, used + n);
  };
  go(0, 0);
  return best;
}
}  // namespace

TEST_CASE("the min-max partition equals the best of every contiguous partition") {
  const auto layers = costs({5, 1, 1, 8, 2, 2, 2, 7, 1, 3, 4});
  for (uint32_t K = 1; K <= 6; ++K) {
    const std::vector<StageSpec> stages(K);
    const Partition p = balance_min_max(layers, stages);
    INFO("K=", K);
    CHECK(p.max_time == doctest::Approx(brute_force_best(layers, stages)));
    uint32_t total = 0;
    for (uint32_t s : p.sizes) {
      total += s;
      CHECK(s >= 1);
    }
    CHECK(total == layers.size());
  }
}

TEST_CASE("a slower device gets fewer layers") {
  const std::vector<LayerCost> layers(12, LayerCost{1.0, 0});
  const Partition even = balance_min_max(layers, {{1.0}, {1.0}});
  CHECK(even.sizes == std::vector<uint32_t>{6, 6});
  const Partition skewed = balance_min_max(layers, {{3.0}, {1.0}});  // stage 0 three times faster
  CHECK(skewed.sizes == std::vector<uint32_t>{9, 3});
  CHECK(skewed.max_time == doctest::Approx(3.0));
  std::vector<StageSpec> mixed = {{1.0}, {0.5}, {2.0}};
  CHECK(balance_min_max(layers, mixed).max_time == doctest::Approx(brute_force_best(layers, mixed)));
}

TEST_CASE("memory caps move layers off a small device or refuse with what is needed") {
  const auto layers = costs({1, 1, 1, 1, 1, 1});  // 100 bytes each
  const Partition p = balance_min_max(layers, {{1.0, 200}, {1.0, 0}});
  CHECK(p.sizes == std::vector<uint32_t>{2, 4});
  CHECK(p.stage_memory[0] <= 200);
  CHECK(p.max_time == doctest::Approx(brute_force_best(layers, {{1.0, 200}, {1.0, 0}})));
  CHECK_THROWS_WITH_AS(balance_min_max(layers, {{1.0, 250}, {1.0, 250}}),
                       doctest::Contains("does not fit 2 stages under their memory caps"), UserError);
}

TEST_CASE("a hand-given balance is checked against the model") {
  const auto layers = costs({1, 2, 3, 4});
  const Partition p = balance_manual(layers, {{}, {}}, {1, 3});
  CHECK(p.stage_time == std::vector<double>{1, 9});
  CHECK(p.first_layer(1) == 1);
  CHECK_THROWS_WITH_AS(balance_manual(layers, {{}, {}}, {1, 2}), doctest::Contains("add up to 3 layers but the model has 4"), UserError);
  CHECK_THROWS_WITH_AS(balance_manual(layers, {{}, {}}, {4}), doctest::Contains("1 cell sizes for 2 stages"), UserError);
  CHECK(parse_balance("3,5,4") == std::vector<uint32_t>{3, 5, 4});
  for (const char* bad : {"", "3,,4", "3,x", "0,4", "-1,5", "3,5,"})
    CHECK_THROWS_AS(parse_balance(bad), UserError);
  CHECK_THROWS_WITH_AS(balance_min_max(layers, std::vector<StageSpec>(5)), doctest::Contains("5 stages for a model of 4 layers"), UserError);
}

TEST_CASE("the bubble fraction of fill-drain is GPipe's (K-1)/(M+K-1)") {
  CHECK(simulated_bubble(gpipe(1, 1, Remat::Never)) == 0.0);
  CHECK(simulated_bubble(gpipe(4, 1, Remat::Never)) == doctest::Approx(0.75));
  CHECK(simulated_bubble(gpipe(4, 16, Remat::Never)) == doctest::Approx(3.0 / 19.0));
  CHECK(simulated_bubble(gpipe(8, 32, Remat::Never)) == doctest::Approx(7.0 / 39.0));
}

TEST_CASE("profiled layer times: a slower device gets fewer layers") {
  // Eight equal layers; stage 1's device measured three times slower on every layer.
  const std::vector<pipeline::LayerCost> layers(8, pipeline::LayerCost{1.0, 0});
  std::vector<pipeline::StageSpec> stages(2);
  stages[0].layer_times.assign(8, 1.0);
  stages[1].layer_times.assign(8, 3.0);
  const pipeline::Partition p = pipeline::balance_min_max(layers, stages);
  CHECK(p.sizes == std::vector<uint32_t>{6, 2});
  CHECK(p.stage_time == std::vector<double>{6.0, 6.0});
  // Without the profile the estimate splits evenly.
  const pipeline::Partition even = pipeline::balance_min_max(layers, std::vector<pipeline::StageSpec>(2));
  CHECK(even.sizes == std::vector<uint32_t>{4, 4});
}

}  // namespace pipeline_partition_test
