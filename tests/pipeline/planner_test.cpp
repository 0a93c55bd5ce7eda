// The planner without a GPU: synthetic layer times, the real memory model and schedules.
#include <doctest/doctest.h>

#include <algorithm>

#include "gpu.h"
#include "model/model.h"
#include "ops/matmul_tiles.h"
#include "pipeline/plan.h"
#include "pipeline/planner.h"
#include "pipeline/profile_cache.h"
#include "pipeline/simulate.h"

namespace pipeline_planner_test {

using namespace brigade;
using namespace brigade::pipeline;

namespace {

// A device on which layer l takes (l + 1) ms per 64 rows forward and twice that backward,
// divided by `speed`, plus `overhead` seconds per layer and pass; bf16 at `bf16_speedup`.
PlanDevice device(const model::Model& m, uint32_t physical, double speed, uint32_t resource,
                  double bf16_speedup = 1.0, double overhead = 0) {
  PlanDevice d;
  d.spec.device = "device " + std::to_string(physical);
  d.spec.physical = physical;
  d.resource = resource;
  d.precisions = {ops::Precision::Fp32, ops::Precision::Bf16};
  for (uint32_t rows = 1; rows <= 64; ++rows)
    for (ops::Precision p : d.precisions) {
      LayerTimes& t = d.times[{rows, p}];
      for (size_t l = 0; l < m.layers.size(); ++l) {
        const double f = 1e-3 * double(l + 1) * rows / 64 / speed / (p == ops::Precision::Bf16 ? bf16_speedup : 1);
        t.forward.push_back(f + overhead), t.backward.push_back(2 * f + overhead);
      }
    }
  return d;
}

SearchSpace space(std::vector<PlanDevice> pool, double link = 0) {
  SearchSpace s;
  s.rows = 64, s.optimizer_states = 2;
  s.pool = std::move(pool);
  s.links.seconds_per_byte.assign(s.pool.size(), std::vector<double>(s.pool.size(), link));
  s.device_orders = device_orders(s.pool, 4);
  s.micro_batches = divisors(64);
  s.schedules = all_schedules();
  s.remats = {Remat::Never, Remat::Always, Remat::ExceptLast};
  s.precision = {ops::Precision::Fp32};
  return s;
}

}  // namespace

TEST_CASE("the simulation serializes stages on one resource and adds each transfer") {
  const Schedule s = build({ScheduleKind::GPipe, 2, 4, 1, Remat::Never});
  ActionTimes t{{1, 1}, {2, 2}, {}, {}, {}};
  const Simulation apart = simulate(s, t);
  CHECK(apart.span == doctest::Approx(3 * 4 + 3));  // GPipe: (M + K - 1) forwards and backwards
  t.resource = {7, 7};
  const Simulation shared = simulate(s, t);
  CHECK(shared.span == doctest::Approx(2 * 4 * 3));  // every action, one at a time
  CHECK(shared.bubble() == doctest::Approx(0.5));
  const Schedule one = build({ScheduleKind::GPipe, 2, 1, 1, Remat::Never});
  ActionTimes moved{{1, 1}, {2, 2}, {0.25}, {0.5}, {}};
  CHECK(simulate(one, moved).span == doctest::Approx(1 + 0.25 + 1 + 2 + 0.5 + 2));
}

TEST_CASE("device orders: every ordered choice once, without repeating a physical order under the same caps") {
  const model::Model m = model::build("fashion-mlp");
  const std::vector<PlanDevice> two{device(m, 0, 1, 0), device(m, 1, 1, 1)};
  CHECK(device_orders(two, 4) == std::vector<std::vector<uint32_t>>{{0}, {1}, {0, 1}, {1, 0}});
  const std::vector<PlanDevice> same{device(m, 0, 1, 0), device(m, 0, 1, 0)};
  CHECK(device_orders(same, 4) == std::vector<std::vector<uint32_t>>{{0}, {0, 1}});
  // One device under two caps (--devices 0,0 --mem-limit 4MiB,64MiB): two choices, each cap
  // its own, where the first entry alone stood for both.
  std::vector<PlanDevice> capped = same;
  capped[0].spec.memory_cap = 4 << 20, capped[1].spec.memory_cap = 64 << 20;
  CHECK(device_orders(capped, 4) == std::vector<std::vector<uint32_t>>{{0}, {1}, {0, 1}, {1, 0}});
  CHECK(divisors(12) == std::vector<uint32_t>{1, 2, 3, 4, 6, 12});
}

TEST_CASE("device orders take the GPUs of one model in pool order, and another model anywhere") {
  const model::Model m = model::build("fashion-mlp");
  std::vector<PlanDevice> pool{device(m, 0, 1, 1), device(m, 1, 1, 2), device(m, 2, 1, 3)};
  pool[0].model = pool[1].model = "GPU A, driver 1";
  pool[2].model = "GPU B, driver 1";
  CHECK(device_orders(pool, 3) == std::vector<std::vector<uint32_t>>{
                                      {0}, {2}, {0, 1}, {0, 2}, {2, 0}, {0, 1, 2}, {0, 2, 1}, {2, 0, 1}});
  // Eight of one model: one order a length, where every ordered choice made 109,600.
  std::vector<PlanDevice> eight;
  for (uint32_t i = 0; i < 8; ++i) eight.push_back(device(m, i, 1, 1 + i)), eight.back().model = "GPU A, driver 1";
  const std::vector<std::vector<uint32_t>> orders = device_orders(eight, 8);
  REQUIRE(orders.size() == 8);
  CHECK(orders.back() == std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7});
  // Their memory budgets a little apart (a desktop holds some of one): planned against the
  // smallest, they are still one model; one with a fifth less is another.
  for (uint32_t i = 0; i < 8; ++i) eight[i].spec.device_memory = (24ull << 30) - i * (40ull << 20);
  align_budgets(eight);
  CHECK(device_orders(eight, 8).size() == 8);
  CHECK(eight[0].spec.device_memory == (24ull << 30) - 7 * (40ull << 20));
  eight[7].spec.device_memory = 19ull << 30;
  align_budgets(eight);
  CHECK(eight[0].spec.device_memory == (24ull << 30) - 7 * (40ull << 20));
  CHECK(device_orders(eight, 2).size() == 1 + 1 + 3);  // [0], [7]; [0,1], [0,7], [7,0]
  // Other caps, or compute shared with another entry, make them other choices.
  std::vector<PlanDevice> capped = pool;
  capped[1].spec.memory_cap = 1 << 30;
  CHECK(device_orders(capped, 2).size() == 3 + 6);
  std::vector<PlanDevice> sharing = pool;
  sharing[1].resource = sharing[2].resource;
  CHECK(device_orders(sharing, 2).size() == 3 + 6);
  // Another driver is another model.
  std::vector<PlanDevice> drivers = pool;
  drivers[1].model = "GPU A, driver 2";
  CHECK(device_orders(drivers, 2).size() == 3 + 6);
  // Three of one model, the link between the first two ten times slower: the third is not
  // the second's stand-in beside the first, so [0, 2] is tried as well as [0, 1].
  std::vector<PlanDevice> three{device(m, 0, 1, 1), device(m, 1, 1, 2), device(m, 2, 1, 3)};
  for (PlanDevice& d : three) d.model = "GPU A, driver 1";
  Links links;
  links.seconds_per_byte.assign(3, std::vector<double>(3, 1e-9));
  CHECK(device_orders(three, 2, links) == std::vector<std::vector<uint32_t>>{{0}, {0, 1}});
  links.seconds_per_byte[0][1] = links.seconds_per_byte[1][0] = 1e-8;
  CHECK(device_orders(three, 2, links) == std::vector<std::vector<uint32_t>>{{0}, {2}, {0, 1}, {0, 2}, {2, 0}});
  // A pair that cannot take a forced link, likewise.
  links.seconds_per_byte.assign(3, std::vector<double>(3, 1e-9));
  links.unlinkable.assign(3, std::vector<std::string>(3));
  links.unlinkable[0][1] = links.unlinkable[1][0] = "`link` host: cannot";
  CHECK(device_orders(three, 2, links).size() == 5);
}

TEST_CASE("the planner ranks by simulated step time and predicts one stage's exactly") {
  const model::Model m = model::build("fashion-mlp");
  const SearchResult r = search(m, space({device(m, 0, 1, 0)}));
  REQUIRE(!r.ranked.empty());
  CHECK(r.considered == r.ranked.size() + r.over_memory);
  // Fastest first, ties (a part in a million) in the order tried.
  for (size_t i = 1; i < r.ranked.size(); ++i)
    CHECK(r.ranked[i - 1].step_seconds <= r.ranked[i].step_seconds + 1e-6 * r.ranked[0].step_seconds);
  // One stage: the mini-batch's forwards and backwards, plus the recomputes remat adds.
  double sum = 0;
  for (size_t l = 0; l < m.layers.size(); ++l) sum += 3e-3 * double(l + 1);
  const Candidate& best = r.ranked.front();
  CHECK(best.devices == std::vector<uint32_t>{0});
  CHECK(best.remat == Remat::Never);
  CHECK(best.step_seconds == doctest::Approx(sum));
  for (const Candidate& c : r.ranked)
    if (c.remat == Remat::Always) CHECK(c.step_seconds == doctest::Approx(sum * 4 / 3));
  // Asked only whether anything fits, it stops at the first that does.
  SearchSpace first = space({device(m, 0, 1, 0)});
  first.first_fit = true;
  const SearchResult one = search(m, first);
  CHECK(one.ranked.size() == 1);
  CHECK(one.considered == 1);
}

TEST_CASE("the planner pipelines devices that run apart and keeps to one of those sharing cores") {
  const model::Model m = model::build("fashion-mlp");
  const SearchResult apart = search(m, space({device(m, 0, 1, 0), device(m, 1, 1, 1)}));
  REQUIRE(!apart.ranked.empty());
  CHECK(apart.ranked.front().devices.size() == 2);
  CHECK(apart.ranked.front().micro_batches > 1);
  // Sharing one resource, a second stage only adds transfers: one stage on one device.
  const SearchResult shared = search(m, space({device(m, 0, 1, 0), device(m, 1, 1, 0)}, 1e-9));
  REQUIRE(!shared.ranked.empty());
  CHECK(shared.ranked.front().devices.size() == 1);
  // A faster device gets the single stage.
  const SearchResult faster = search(m, space({device(m, 0, 1, 0), device(m, 1, 3, 0)}, 1e-9));
  CHECK(faster.ranked.front().devices == std::vector<uint32_t>{1});
}

TEST_CASE("fixed axes stay fixed and precision is chosen per device") {
  const model::Model m = model::build("fashion-mlp");
  SearchSpace s = space({device(m, 0, 1, 0, 2.0), device(m, 1, 1, 1, 1.0)});
  s.micro_batches = {8};
  s.schedules = {{ScheduleKind::OneFOneB, 1}};
  s.device_orders = {{0, 1}};
  s.precision.clear();
  const SearchResult r = search(m, s);
  REQUIRE(!r.ranked.empty());
  for (const Candidate& c : r.ranked) {
    CHECK(c.micro_batches == 8);
    CHECK(c.schedule == ScheduleChoice{ScheduleKind::OneFOneB, 1});
    CHECK(c.devices == std::vector<uint32_t>{0, 1});
  }
  // Device 0 is faster in bf16; device 1 is not, and ties keep fp32 (its first choice).
  CHECK(r.ranked.front().precision == std::vector<ops::Precision>{ops::Precision::Bf16, ops::Precision::Fp32});
}

TEST_CASE("a boundary a pair of devices cannot take is left out, and said when nothing else is there") {
  const model::Model m = model::build("fashion-mlp");
  SearchSpace s = space({device(m, 0, 1, 1), device(m, 1, 1, 2), device(m, 2, 1, 3)});
  s.micro_batches = {8};
  s.links.unlinkable.assign(3, std::vector<std::string>(3));
  s.links.unlinkable[0][1] = s.links.unlinkable[1][0] = "`link` fd: devices 0 and 1 cannot take this path";
  const SearchResult r = search(m, s);
  REQUIRE(!r.ranked.empty());
  bool pipelined = false;
  for (const Candidate& c : r.ranked) {
    const size_t K = c.devices.size();
    pipelined = pipelined || K > 1;
    for (size_t k = 0; k + 1 < K; ++k) CHECK(s.links.unlinkable[c.devices[k]][c.devices[k + 1]].empty());
    // Interleaved cells also pass from the last stage back to the first.
    if (c.schedule.virtual_stages > 1) CHECK(s.links.unlinkable[c.devices[K - 1]][c.devices[0]].empty());
  }
  CHECK(pipelined);
  // No pair linkable and more than one stage asked for: refused with the pair's reason.
  for (auto& row : s.links.unlinkable) std::fill(row.begin(), row.end(), "`link` fd: no pair can take this path");
  for (uint32_t i = 0; i < 3; ++i) s.links.unlinkable[i][i].clear();
  s.device_orders = {{0, 1}, {1, 2}};
  const SearchResult none = search(m, s);
  CHECK(none.ranked.empty());
  CHECK(none.refused == "`link` fd: no pair can take this path");
}

TEST_CASE("a per-stage precision holds each stage to its own, auto being its device's, in every device order") {
  const model::Model m = model::build("fashion-mlp");
  // Both devices faster in bf16 (what each multiplies), so only the fixed stage keeps fp32.
  SearchSpace s = space({device(m, 0, 1, 0, 2.0), device(m, 1, 1, 1, 2.0)});
  s.pool[0].multiplies = s.pool[1].multiplies = ops::Precision::Bf16;
  s.micro_batches = {8};
  s.device_orders = {{0, 1}, {1, 0}};
  s.precision = {ops::Precision::Fp32, std::nullopt};  // --precision fp32,auto
  const SearchResult r = search(m, s);
  REQUIRE(!r.ranked.empty());
  for (const Candidate& c : r.ranked)
    CHECK(c.precision == std::vector<ops::Precision>{ops::Precision::Fp32, ops::Precision::Bf16});
}

TEST_CASE("configurations over a memory cap are pruned, and when none fits the closest says why") {
  const model::Model m = model::build("fashion-mlp");
  SearchSpace s = space({device(m, 0, 1, 0)});
  const uint64_t unbounded = search(m, s).ranked.front().peak.front();
  s.pool[0].spec.memory_cap = unbounded - 1;
  const SearchResult capped = search(m, s);
  REQUIRE(!capped.ranked.empty());
  CHECK(capped.over_memory > 0);
  for (const Candidate& c : capped.ranked) CHECK(c.peak.front() <= unbounded - 1);
  s.pool[0].spec.memory_cap = 1024;
  const SearchResult none = search(m, s);
  CHECK(none.ranked.empty());
  CHECK(none.over_memory == none.considered);
  CHECK(none.closest.find("memory_cap") != std::string::npos);
}

// fashion-mlp's parameters (918.8 KiB) past both devices' largest allocation: only the
// configurations that cut them over two stages or more remain.
TEST_CASE("configurations holding a buffer past a device's limits are pruned") {
  const model::Model m = model::build("fashion-mlp");
  SearchSpace s = space({device(m, 0, 1, 0), device(m, 1, 1, 1)});
  s.device_orders = device_orders(s.pool, 4);
  for (PlanDevice& d : s.pool) d.spec.facts.max_allocation = 900 << 10;
  const SearchResult r = search(m, s);
  REQUIRE(!r.ranked.empty());
  CHECK(r.over_memory > 0);
  for (const Candidate& c : r.ranked) CHECK(c.devices.size() >= 2);
}

TEST_CASE("16 bits are chosen only where predicted faster by more than their margin") {
  const model::Model m = model::build("fashion-mlp");
  for (const double speedup : {1.03, 1.10}) {
    SearchSpace s = space({device(m, 0, 1, 0, speedup)});
    s.precision.clear();
    const SearchResult r = search(m, s);
    REQUIRE(!r.ranked.empty());
    const ops::Precision want = speedup > 1 + s.sixteen_bit_margin ? ops::Precision::Bf16 : ops::Precision::Fp32;
    CHECK(r.ranked.front().precision == std::vector<ops::Precision>{want});
  }
}

}  // namespace pipeline_planner_test

namespace pipeline_planner_test {

// A GPT block whose attention runs as flash attention on matrix tiles keeps no (T,T) scores, so
// its cell's scratch plans none, in the 16-bit types whose products the device runs on matrix
// units and only there (this device lists fp16 alone).
TEST_CASE("a 16-bit GPT block on flash attention's matrix tiles plans no (T,T) scores in its scratch") {
  const vk::PhysicalInfo gpu = test::synthetic_gpu(vk::MatrixShape::Element::Fp16);
  const model::Model m = model::build("gpt-mini");
  const std::vector<uint8_t> lean = m.lean_scratch(gpu);
  if (!ops::default_matrix_tiling(gpu, ops::Precision::Fp16)) {  // built without the cooperative-matrix kernels
    CHECK(std::count(lean.begin(), lean.end(), 0) == long(lean.size()));
    MESSAGE("not in this build: no cooperative-matrix kernels (tools/install-glslang.sh)");
    return;
  }
  const uint32_t L = uint32_t(m.layers.size()), rows = 4;
  for (uint32_t l = 0; l < L; ++l)
    CHECK_MESSAGE(lean[l] == (m.layers[l]->kind() == "gpt_attention" ? 1u << uint32_t(ops::Precision::Fp16) : 0u), "layer ", l);
  const std::vector<bool> half = m.stores_half(gpu);
  const auto scratch = [&](ops::Precision p, const std::vector<uint8_t>& facts) {
    const CellLayout c = layout_cell(m, 0, 0, L, true, rows, {}, std::vector<ops::Precision>(L, p), {half, facts});
    return c.scratch_bytes;
  };
  // One sample's scores of every head, P and dS, at the least: gone in fp16, kept in bf16.
  const uint64_t scores = uint64_t(2) * 4 * 128 * 128 * 4;  // gpt-mini: 4 heads, 128 tokens
  CHECK(scratch(ops::Precision::Fp16, lean) + scores <= scratch(ops::Precision::Fp16, {}));
  CHECK(scratch(ops::Precision::Bf16, lean) == scratch(ops::Precision::Bf16, {}));
  const CellLayout c = layout_cell(m, 0, 0, L, true, rows, {}, std::vector<ops::Precision>(L, ops::Precision::Fp16), {half, lean});
  for (uint32_t l = 0; l < L; ++l) CHECK(c.lean[l] == (lean[l] != 0));
}

// A convolution that reads a 16-bit boundary multiplies in 16 bits on matrix units whatever
// its own stage stores (ops::conv2d's products_of reads x's format), so an fp32 stage after a
// 16-bit one sizes its scratch for the packed weight and output gradient: sized by the fp32
// output, the device's kernels found it short of one sample.
TEST_CASE("an fp32 stage whose convolution reads a 16-bit boundary has the scratch of its 16-bit products") {
  const vk::PhysicalInfo gpu = test::synthetic_gpu(vk::MatrixShape::Element::Fp16);
  if (!ops::default_matrix_tiling(gpu, ops::Precision::Fp16)) {
    MESSAGE("not in this build: no cooperative-matrix kernels (tools/install-glslang.sh)");
    return;
  }
  const model::Model m = model::build("fashion-cnn-bn");  // its second convolution, without a fold
  const uint32_t L = uint32_t(m.layers.size()), first = 4, rows = 64;
  REQUIRE(m.layers[first]->kind() == "conv2d");
  std::vector<ops::Precision> precision(L, ops::Precision::Fp32);
  std::fill(precision.begin(), precision.begin() + first, ops::Precision::Fp16);
  const CellLayout c = layout_cell(m, 1, first, L, true, rows, {}, precision, device_facts(m, gpu));
  REQUIRE(c.direct.at(0));
  CHECK(c.input_precision == ops::Precision::Fp16);
  CHECK(c.scratch_precision.at(0) == ops::Precision::Fp16);
  const model::Layer& conv = *m.layers[first];
  CHECK(conv.scratch_floats(rows, ops::Precision::Fp16) > conv.scratch_floats(rows, ops::Precision::Fp32));
  CHECK(c.scratch_bytes >= conv.scratch_floats(rows, ops::Precision::Fp16) * 4);
}

TEST_CASE("a GPT's tied embedding is tied in a cell holding wte or lm_head without the other") {
  const model::Model m = model::build("gpt-mini", {"n_layer=2"});  // embedding, 4 block layers, ln_f, lm_head
  const uint32_t L = uint32_t(m.layers.size());
  const std::vector<std::string> wte{"transformer.wte.weight"};
  const CellLayout whole = layout_cell(m, 0, 0, L, true, 4, {});
  CHECK(whole.tied.empty());
  CHECK(std::count_if(whole.params.begin(), whole.params.end(), [&](const model::ParamSpec& p) { return p.name == wte[0]; }) == 1);
  CHECK(layout_cell(m, 0, 0, 2, false, 4, {}).tied == wte);
  CHECK(layout_cell(m, 1, 2, L, true, 4, {}).tied == wte);
  CHECK(layout_cell(m, 2, L - 1, L, true, 4, {}).tied == wte);
  CHECK(layout_cell(m, 1, 1, L - 1, false, 4, {}).tied.empty());
  // A forward sums no gradients.
  CHECK(layout_cell(m, 0, 0, 2, false, 4, {.training = false}).tied.empty());
}

TEST_CASE("a profile is kept by the model's input window, which a GPT's configuration does not change") {
  const model::Model m = model::build("gpt-mini");
  const model::Model short_window = model::with_window(m, 8);
  REQUIRE(short_window.config == m.config);
  const vk::PhysicalInfo info;
  CHECK(profile_key(info, m, 1, ops::Precision::Fp32) != profile_key(info, short_window, 1, ops::Precision::Fp32));
  CHECK(profile_key(info, short_window, 1, ops::Precision::Fp32) ==
        profile_key(info, model::with_window(m, 8), 1, ops::Precision::Fp32));
}

TEST_CASE("when no cut fits, the plan shows the cut needing the least memory, whatever the stages' times") {
  const model::Model m = model::build("gpt-mini");
  PlanOptions o;
  o.rows = 4, o.schedule = ScheduleKind::OneFOneB, o.optimizer_states = 2;
  o.stages.assign(3, StageSpec{});
  for (StageSpec& st : o.stages) st.memory_cap = 8 << 20;
  const Plan by_memory = plan(m, o);
  REQUIRE(!by_memory.problem.empty());
  // Measured times that would cut the embedding off alone.
  for (StageSpec& st : o.stages) {
    st.layer_times.assign(m.layers.size(), 1e-3);
    st.layer_times[0] = 1;
  }
  const Plan timed = plan(m, o);
  CHECK(timed.partition.sizes == by_memory.partition.sizes);
  CHECK(timed.problem == by_memory.problem);
  CHECK(timed.problem.find("in the one needing the least memory, stage ") != std::string::npos);
}

TEST_CASE("stages capped above their device's memory are still held to the device's memory together") {
  const model::Model m = model::build("fashion-mlp");
  PlanOptions o;
  o.rows = 64, o.optimizer_states = 2;
  o.stages.assign(2, StageSpec{});
  for (StageSpec& st : o.stages) st.physical = 0, st.device_memory = 3 << 20;  // about 3.6 MiB needed
  const Plan uncapped = plan(m, o);
  CHECK(uncapped.problem.find("stages 0, 1 on device 0 need ") != std::string::npos);
  CHECK(uncapped.problem.find("set each stage's cap yourself") != std::string::npos);
  for (StageSpec& st : o.stages) st.memory_cap = uint64_t(1) << 40;
  const Plan capped = plan(m, o);
  CHECK(capped.problem.find("stages 0, 1 on device 0 need ") != std::string::npos);
  CHECK(capped.problem.find("set each stage's cap yourself") == std::string::npos);
}

TEST_CASE("a hand-given balance of the wrong length under an interleaved schedule counts cells, not stages") {
  const model::Model m = model::build("fashion-mlp");
  PlanOptions o;
  o.rows = 8, o.micro_batches = 4, o.schedule = ScheduleKind::Interleaved, o.virtual_stages = 2;
  o.stages.assign(2, StageSpec{});
  o.balance = {5, 6};
  std::string what;
  try {
    plan(m, o);
  } catch (const UserError& e) {
    what = e.what();
  }
  CHECK(what == "`balance`: 2 cell sizes for 4 cells (2 stages x 2 virtual stages); give one size per cell");
}

// A device binds no buffer past its maxStorageBufferRange and allocates none past its
// maxMemoryAllocationSize: a plan holding one is refused, naming the stage, the buffer and
// what to change, and where another cut holds none the search takes it.
TEST_CASE("a buffer past the device's binding or allocation limit is refused or cut around") {
  const model::Model m = model::build("fashion-mlp");
  PlanOptions o;
  o.rows = 1024, o.optimizer_states = 2;
  o.stages.assign(1, StageSpec{});
  o.stages[0].device = "device 0";
  o.stages[0].facts.max_binding = 2 << 20;  // the input, 1024 x 784 floats, is 3.1 MiB
  const Plan whole = plan(m, o);
  CHECK(whole.problem ==
        "stage 0 (device 0): tensor 'input' is 3.1 MiB, over this device's maxStorageBufferRange of 2.0 MiB, the most "
        "a kernel binds; use more micro-batches (`micro_batches`) or a smaller mini-batch (`rows`)");
  REQUIRE(whole.over_limits.size() == 1);
  CHECK(whole.over_limits[0] == whole.problem.substr(std::string("stage 0 (device 0): ").size()));
  o.micro_batches = 2;
  CHECK(plan(m, o).problem.empty());
  // A parameter is never split.
  o.rows = 64, o.micro_batches = 1;
  o.stages[0].facts.max_binding = 512 << 10;
  CHECK(plan(m, o).problem.find("tensor '1.weight' is 784.0 KiB, over this device's maxStorageBufferRange of 512.0 "
                                "KiB, the most a kernel binds; a parameter is never split") != std::string::npos);
  // The parameters' arenas (918.8 KiB) past the largest allocation: more stages.
  o.stages[0].facts.max_binding = 0, o.stages[0].facts.max_allocation = 900 << 10;
  CHECK(plan(m, o).problem.find("stage 0 (device 0): 'parameters' arena is 918.8 KiB, over this device's "
                                "maxMemoryAllocationSize of 900.0 KiB, its largest allocation; add stages "
                                "(`devices`)") == 0);
  o.stages.assign(2, o.stages[0]);
  const Plan two = plan(m, o);
  CHECK(two.problem.empty());
  for (const CellLayout& c : two.cells) CHECK(c.arena().bytes <= 900u << 10);
  // gpt-mini on two stages, the first eight times as fast, so the fastest cut gives it most
  // of the blocks: an allocation limit just under its arena moves the cut.
  const model::Model gpt = model::build("gpt-mini");
  PlanOptions g;
  g.rows = 2, g.optimizer_states = 2;  // activations well under the arenas
  g.stages.assign(2, StageSpec{});
  g.stages[0].speed = 8;
  const Plan fastest = plan(gpt, g);
  REQUIRE(fastest.problem.empty());
  uint64_t fullest = 0;
  for (const CellLayout& c : fastest.cells) fullest = std::max(fullest, c.arena().bytes);
  for (StageSpec& st : g.stages) st.facts.max_allocation = fullest - 1;
  const Plan moved = plan(gpt, g);
  CHECK_MESSAGE(moved.problem.empty(), moved.problem);
  CHECK(moved.partition.sizes != fastest.partition.sizes);
  for (const CellLayout& c : moved.cells) CHECK(c.arena().bytes < fullest);
}

// Interleaved, a stage's cap holds its cells' sum: cells of unequal footprints that fit it
// together are cut, not refused for passing half the cap each.
TEST_CASE("an interleaved stage's cap holds its cells together, however unevenly they share it") {
  const model::Model m = model::build("gpt-mini");
  PlanOptions o;
  o.rows = 8, o.micro_batches = 4, o.schedule = ScheduleKind::Interleaved, o.virtual_stages = 2;
  o.optimizer_states = 2;
  o.stages.assign(2, StageSpec{});
  for (StageSpec& st : o.stages) st.memory_cap = 24 << 20;
  const Plan p = plan(m, o);
  CHECK(p.problem.empty());
  for (uint32_t k = 0; k < 2; ++k) CHECK(total(p.stage_memory(k, 2)) <= 24u << 20);
  // No cell fits half the cap: the equal shares found no cut.
  bool over_half = false;
  for (const CellLayout& c : p.cells) over_half = over_half || total(c.memory(2)) > 12u << 20;
  CHECK(over_half);
  // Where nothing fits, the cut shown is the one whose fullest stage needs the least.
  for (StageSpec& st : o.stages) st.memory_cap = 8 << 20;
  const Plan tight = plan(m, o);
  CHECK(tight.problem.find("no cut of gpt-mini into 4 cells fits under `memory_cap`; in the one needing the least "
                           "memory, stage ") == 0);
  uint64_t fullest = 0;
  for (uint32_t k = 0; k < 2; ++k) fullest = std::max(fullest, total(tight.stage_memory(k, 2)));
  uint64_t least = ~uint64_t(0);  // over every cut by hand
  const uint32_t L = uint32_t(m.layers.size());
  for (uint32_t a = 1; a < L; ++a)
    for (uint32_t b = 1; a + b < L; ++b)
      for (uint32_t c = 1; a + b + c < L; ++c) {
        o.balance = {a, b, c, L - a - b - c};
        const Plan by_hand = plan(m, o);
        least = std::min(least, std::max(total(by_hand.stage_memory(0, 2)), total(by_hand.stage_memory(1, 2))));
      }
  CHECK(fullest == least);
}

}  // namespace pipeline_planner_test
