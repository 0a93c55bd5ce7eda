#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "check.h"
#include "gpu.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/lr_schedule.h"
#include "optim/sgd.h"
#include "ref/optim.h"
#include "vk/commands.h"

namespace kernels_optim_test {

using namespace brigade;
using vk::Category;

namespace {

// Odd lengths: one element, one not a multiple of the workgroup, one just over 16 groups.
const std::vector<uint32_t> kLengths = {1, 1000, 4099};
constexpr int kSteps = 5;
// fp32 against double over five steps; about five times the largest error seen on lavapipe
// (the momentum buffer, a sum of cancelling terms, needs the most).
constexpr double kSgdTol = 1e-6;
constexpr double kAdamWAtol = 5e-7, kAdamWRtol = 5e-6;

// The double reference of one update of one tensor: param, grad, state buffers, n, step.
using RefStep =
    std::function<void(std::span<double>, std::span<const double>,
                       std::vector<std::vector<double>>&, uint32_t, const optim::Step&)>;

struct Tensor {
  vk::Buffer param, grad;
  std::vector<double> p;                   // reference parameter
  std::vector<std::vector<double>> state;  // reference state, in the optimizer's order
};

std::vector<float> step_gradient(size_t tensor, int step, uint32_t n) {
  return test::random_vector(n, 1000 + 10 * uint32_t(tensor) + uint32_t(step));
}

// Runs kSteps updates of `opt` on tensors of kLengths on `dev` and the same updates of `ref`
// in double, the learning rate from `schedule` and, when max_norm > 0, the gradients
// clipped to max_norm (GradNorm on the GPU, the exact norm for the reference). Compares
// parameters and state after every step. With `arena`, the tensors are parts of a parameter
// and a gradient arena, as a pipeline cell holds them: one dispatch updates them all, and
// the padding between them stays zero; where the arena is wider than the device binds (a
// device made with DeviceOptions::max_binding), in two windows, each a dispatch.
void check_steps(vk::Device& dev, optim::Optimizer& opt, const RefStep& ref,
                 const optim::LrSchedule& schedule, double max_norm, double atol, double rtol,
                 const std::string& what, bool arena) {
  std::vector<uint64_t> sizes;
  for (uint32_t n : kLengths) sizes.push_back(n * 4ull);
  const vk::ArenaLayout layout = vk::arena_layout(sizes);
  vk::Buffer param_arena, grad_arena;
  if (arena) {
    param_arena = test::zeros(dev, uint32_t(layout.bytes / 4), "parameters", Category::Parameters);
    grad_arena = test::zeros(dev, uint32_t(layout.bytes / 4), "gradients", Category::Gradients);
  }
  const size_t passes = !arena ? kLengths.size() : layout.bytes <= dev.info().max_storage_buffer_range ? 1 : 2;
  std::vector<Tensor> tensors;
  for (size_t k = 0; k < kLengths.size(); ++k) {
    const auto p = test::random_vector(kLengths[k], 100 + uint32_t(k));
    const std::string name = std::to_string(k);
    Tensor t{arena ? vk::Buffer(param_arena, layout.offsets[k], sizes[k], "p" + name)
                   : test::zeros(dev, kLengths[k], "p" + name, Category::Parameters),
             arena ? vk::Buffer(grad_arena, layout.offsets[k], sizes[k], "g" + name)
                   : test::zeros(dev, kLengths[k], "g" + name, Category::Gradients),
             test::to_double(p),
             {}};
    vk::upload(t.param, p.data(), sizes[k]);
    tensors.push_back(std::move(t));
  }
  std::vector<vk::View> grads;
  for (size_t k = 0; k < tensors.size(); ++k) {
    opt.add("t" + std::to_string(k), tensors[k].param, tensors[k].grad);
    tensors[k].state.assign(opt.slots()[k].state.size(), std::vector<double>(kLengths[k], 0.0));
    grads.emplace_back(tensors[k].grad);
  }
  const optim::GradNorm norm(dev, grads);
  for (int s = 0; s < kSteps; ++s) {
    optim::Step step{uint64_t(s + 1), optim::learning_rate(schedule, uint64_t(s)), 1.0};
    double ref_squared = 0;
    for (size_t k = 0; k < tensors.size(); ++k) {
      const auto g = step_gradient(k, s, kLengths[k]);
      vk::upload(tensors[k].grad, g.data(), g.size() * 4);
      ref_squared += ref::squared_norm<double>(test::to_double(g), kLengths[k]);
    }
    optim::Step ref_step = step;
    if (max_norm > 0) {
      vk::Commands cmd(dev, "norm");
      norm.record(cmd);
      CHECK(cmd.dispatches() == passes);
      cmd.run();
      step.grad_scale = optim::clip(norm.squared(), max_norm).grad_scale;
      ref_step.grad_scale = optim::clip(ref_squared, max_norm).grad_scale;
      REQUIRE(ref_step.grad_scale < 1);  // the case exercises clipping
    }
    vk::Commands cmd(dev, "step");
    opt.record(cmd, step);
    CHECK(cmd.dispatches() == passes);
    cmd.run();
    for (size_t k = 0; k < tensors.size(); ++k) {
      const auto g = test::to_double(step_gradient(k, s, kLengths[k]));
      ref(tensors[k].p, g, tensors[k].state, kLengths[k], ref_step);
      const std::string at =
          what + (arena ? " in an arena" : "") + ", step " + std::to_string(s + 1) + ", n=" + std::to_string(kLengths[k]);
      test::check_close(test::to_host(tensors[k].param), test::to_float(tensors[k].p), atol, rtol,
                        at + ": param");
      for (size_t j = 0; j < tensors[k].state.size(); ++j)
        test::check_close(test::to_host(opt.slots()[k].state[j]),
                          test::to_float(tensors[k].state[j]), atol, rtol,
                          at + ": state " + std::to_string(j));
    }
    if (arena) {
      // The norm's tables over the parameters, at the gradients' places.
      vk::Commands check(dev, "parameter norms");
      norm.record(check, grad_arena, param_arena);
      check.run();
      std::vector<double> each;
      norm.squared(&each);
      for (size_t k = 0; k < kLengths.size(); ++k) {
        double want = 0;
        for (float v : test::to_host(tensors[k].param)) want += double(v) * v;
        CHECK_MESSAGE(std::abs(each[k] - want) <= 1e-5 * want, "parameter ", k, ": gpu ", each[k], " cpu ", want);
      }
      const std::vector<float> whole = test::to_host(param_arena);
      for (size_t k = 0; k < kLengths.size(); ++k) {
        const uint64_t end = k + 1 < kLengths.size() ? layout.offsets[k + 1] : layout.bytes;
        for (uint64_t b = layout.offsets[k] + sizes[k]; b < end; b += 4) REQUIRE(whole[b / 4] == 0.0f);
      }
    }
  }
}

// Both layouts, a fresh optimizer for each.
template <class Opt, class Options>
void check_steps(vk::Device& dev, const Options& o, const RefStep& ref, const optim::LrSchedule& schedule,
                 double max_norm, double atol, double rtol, const std::string& what) {
  for (bool arena : {false, true}) {
    Opt opt(o);
    check_steps(dev, opt, ref, schedule, max_norm, atol, rtol, what, arena);
  }
}

RefStep sgd_ref(const optim::SgdOptions& o) {
  return [o](std::span<double> p, std::span<const double> g, std::vector<std::vector<double>>& st,
             uint32_t n, const optim::Step& step) {
    std::vector<double> none;
    ref::sgd_step<double>(p, g, st.empty() ? std::span<double>(none) : std::span<double>(st[0]), n,
                          o, step);
  };
}

RefStep adamw_ref(const optim::AdamWOptions& o) {
  return [o](std::span<double> p, std::span<const double> g, std::vector<std::vector<double>>& st,
             uint32_t n,
             const optim::Step& step) { ref::adamw_step<double>(p, g, st[0], st[1], n, o, step); };
}

}  // namespace

TEST_CASE_FIXTURE(
    test::Gpu,
    "sgd matches the double reference over five steps with and without momentum and weight decay") {
  struct Case {
    const char* name;
    optim::SgdOptions o;
  };
  const Case cases[] = {
      {"plain", {0, 0, false}},      {"weight decay", {0, 0.05, false}},
      {"momentum", {0.9, 0, false}}, {"momentum and weight decay", {0.9, 0.05, false}},
      {"nesterov", {0.9, 0, true}},  {"nesterov and weight decay", {0.8, 0.05, true}}};
  for (const Case& c : cases) {
    for (bool arena : {false, true}) {
      optim::Sgd sgd(c.o);
      check_steps(device(), sgd, sgd_ref(c.o), optim::constant(0.1), 0, kSgdTol, kSgdTol, c.name, arena);
      CHECK(sgd.state().size() == (c.o.momentum != 0 ? kLengths.size() : 0));
    }
  }
}

TEST_CASE_FIXTURE(test::Gpu,
                  "sgd with clipped gradients and a scheduled rate matches the double reference") {
  const optim::SgdOptions o{0.9, 0.01, true};
  check_steps<optim::Sgd>(device(), o, sgd_ref(o), optim::warmup_cosine(0.2, 0.01, 2, 5), 3.0, kSgdTol,
                          kSgdTol, "clipped nesterov");
}

TEST_CASE_FIXTURE(
    test::Gpu, "adamw matches the double reference over five steps with and without weight decay") {
  struct Case {
    const char* name;
    optim::AdamWOptions o;
  };
  const Case cases[] = {{"no weight decay", {0.9, 0.999, 1e-8, 0}},
                        {"weight decay", {0.9, 0.999, 1e-8, 0.1}},
                        {"other betas and eps", {0.8, 0.95, 1e-3, 0.01}}};
  for (const Case& c : cases) {
    check_steps<optim::AdamW>(device(), c.o, adamw_ref(c.o), optim::constant(0.01), 0, kAdamWAtol, kAdamWRtol,
                              c.name);
  }
}

TEST_CASE_FIXTURE(
    test::Gpu, "adamw with clipped gradients and a scheduled rate matches the double reference") {
  const optim::AdamWOptions o{0.9, 0.999, 1e-8, 0.1};
  check_steps<optim::AdamW>(device(), o, adamw_ref(o), optim::warmup_cosine(0.01, 0.001, 2, 5), 3.0,
                            kAdamWAtol, kAdamWRtol, "clipped adamw");
}

TEST_CASE_FIXTURE(test::Gpu,
                  "the first adamw step moves every parameter by lr against its gradient's sign") {
  // m_hat = g and sqrt(v_hat) = |g| after one step, so the update is lr * g / (|g| + eps):
  // a test of the bias corrections computed on the host.
  vk::Device& dev = device();
  const uint32_t n = 777;
  const double lr = 0.01;
  const auto p0 = test::random_vector(n, 7), g = test::random_vector(n, 8, 0.1f, 1.0f);
  auto neg = g;
  for (uint32_t i = 0; i < n; i += 2) neg[i] = -g[i];
  vk::Buffer p = test::to_device(dev, p0, "p", Category::Parameters);
  vk::Buffer gb = test::to_device(dev, neg, "g", Category::Gradients);
  optim::AdamW adamw({0.9, 0.999, 1e-8, 0});
  adamw.add("p", p, gb);
  vk::Commands cmd(dev, "adamw");
  adamw.record(cmd, {1, lr, 1.0});
  cmd.run();
  const auto p1 = test::to_host(p);
  std::vector<float> want(n);
  for (uint32_t i = 0; i < n; ++i) want[i] = float(p0[i] - (neg[i] > 0 ? lr : -lr));
  test::check_close(p1, want, 2e-7, 1e-6, "first adamw step");
}

// An arena wider than the device's maxStorageBufferRange (lowered to 17 KiB, so the arena of
// kLengths, 20.5 KiB, takes two windows and each tensor fits one): the updates and the norms
// run a window at a time and match the reference, the state arenas shared by the windows.
TEST_CASE_FIXTURE(test::Gpu, "an arena wider than the device binds is updated and reduced in windows") {
  vk::DeviceOptions options;
  options.label = "binding 17 KiB";
  options.subgroup_size = test::test_subgroup_size();
  options.max_binding = 17 << 10;
  vk::Device narrow(test::instance(), test::test_device_index(), options);
  REQUIRE(narrow.info().max_storage_buffer_range == 17u << 10);
  const optim::SgdOptions sgd{0.9, 0.01, true};
  check_steps<optim::Sgd>(narrow, sgd, sgd_ref(sgd), optim::constant(0.1), 3.0, kSgdTol, kSgdTol, "windows, sgd");
  const optim::AdamWOptions adamw{0.9, 0.999, 1e-8, 0.1};
  check_steps<optim::AdamW>(narrow, adamw, adamw_ref(adamw), optim::constant(0.01), 3.0, kAdamWAtol, kAdamWRtol,
                            "windows, adamw");
}

TEST_CASE_FIXTURE(test::Gpu, "the gpu norm of a million-element gradient equals the cpu norm") {
  vk::Device& dev = device();
  const uint32_t n = 1000000;
  const auto g = test::random_vector(n, 11, -3.0f, 2.0f);
  vk::Buffer gb = test::to_device(dev, g, "g", Category::Gradients);
  optim::GradNorm norm(dev, {gb});
  vk::Commands cmd(dev, "norm");
  norm.record(cmd);
  cmd.run();
  const double want = std::sqrt(ref::squared_norm<double>(test::to_double(g), n));
  const double got = std::sqrt(norm.squared());
  CHECK_MESSAGE(std::abs(got - want) <= 1e-5 * want, "gpu norm ", got, " cpu norm ", want,
                " relative error ", std::abs(got - want) / want);
}

// An arena of more tensors than a dispatch's 65535 workgroups along x (one workgroup each):
// the entries past the grid's width run in further rows, each tensor's norm its own.
TEST_CASE_FIXTURE(test::Gpu, "the gpu norms of 65541 one-float tensors in one arena are each their own") {
  vk::Device& dev = device();
  const uint32_t n = 65541;
  std::vector<float> g(n);
  for (uint32_t i = 0; i < n; ++i) g[i] = float(i % 7) - 3.0f;
  vk::Buffer gb = test::to_device(dev, g, "g", Category::Gradients);
  std::vector<vk::View> views;
  for (uint32_t i = 0; i < n; ++i) views.emplace_back(gb, uint64_t(i) * 4, 4);
  const optim::GradNorm norm(dev, views);
  vk::Commands cmd(dev, "norm");
  norm.record(cmd);
  cmd.run();
  std::vector<double> each;
  double want = 0;
  for (float v : g) want += double(v) * v;
  CHECK(norm.squared(&each) == want);
  REQUIRE(each.size() == n);
  uint32_t wrong = 0;
  for (uint32_t i = 0; i < n; ++i) wrong += each[i] != double(g[i]) * g[i];
  CHECK(wrong == 0);
}

TEST_CASE_FIXTURE(
    test::Gpu,
    "squared norms of tensors on two stages add up to the global norm deterministically") {
  // Stage 0 holds three tensors, stage 1 (another logical device) two more: the sum of the
  // stages' squared norms is the norm of all gradients, as clip_grad_norm_ sees them.
  const std::vector<std::vector<uint32_t>> lengths = {{1, 1000, 4099}, {257, 70001}};
  std::vector<std::vector<vk::Buffer>> buffers(2);
  double want = 0;
  uint32_t seed = 20;
  for (size_t s = 0; s < 2; ++s)
    for (uint32_t n : lengths[s]) {
      const auto g = test::random_vector(n, seed++);
      want += ref::squared_norm<double>(test::to_double(g), n);
      buffers[s].push_back(
          test::to_device(device(s), g, "g" + std::to_string(seed), Category::Gradients));
    }
  double got = 0, again = 0;
  for (size_t s = 0; s < 2; ++s) {
    const optim::GradNorm norm(device(s), {buffers[s].begin(), buffers[s].end()});
    vk::Commands cmd(device(s), "norm");
    norm.record(cmd);
    cmd.run();
    CHECK(cmd.barriers() == 0);  // the per-tensor reductions are independent
    got += norm.squared();
    cmd.reset();
    norm.record(cmd);
    cmd.run();
    again += norm.squared();
  }
  CHECK_MESSAGE(std::abs(got - want) <= 1e-5 * want, "gpu ", got, " cpu ", want);
  CHECK(got == again);
}

TEST_CASE("clipping happens only when the total norm exceeds max_norm") {
  const auto over = optim::clip(25.0, 1.0);  // total norm 5
  CHECK(over.total_norm == 5.0);
  CHECK(over.grad_scale == doctest::Approx(1.0 / (5.0 + 1e-6)).epsilon(1e-15));
  const auto under = optim::clip(0.25, 1.0);  // total norm 0.5
  CHECK(under.total_norm == 0.5);
  CHECK(under.grad_scale == 1.0);
  CHECK(optim::clip(0.0, 1.0).grad_scale == 1.0);
  // torch's 1e-6 in the denominator: a norm equal to max_norm is scaled by 1 / (1 + 1e-6),
  // one just under max_norm - 1e-6 is left alone.
  CHECK(optim::clip(1.0, 1.0).grad_scale == doctest::Approx(1.0 / (1.0 + 1e-6)).epsilon(1e-15));
  CHECK(optim::clip(std::pow(1.0 - 2e-6, 2), 1.0).grad_scale == 1.0);
  CHECK(std::isnan(optim::clip(NAN, 1.0).grad_scale));
  CHECK(optim::clip(INFINITY, 1.0).grad_scale == 0.0);
  CHECK_THROWS_AS(optim::clip(1.0, 0.0), UserError);
}

TEST_CASE_FIXTURE(
    test::Gpu,
    "a gradient whose gpu norm is under max_norm is left alone and one over it is clipped") {
  vk::Device& dev = device();
  const uint32_t n = 4099;
  const auto g = test::random_vector(n, 60);
  vk::Buffer gb = test::to_device(dev, g, "g", Category::Gradients);
  const optim::GradNorm norm(dev, {gb});
  vk::Commands cmd(dev, "norm");
  norm.record(cmd);
  cmd.run();
  const double total = std::sqrt(ref::squared_norm<double>(test::to_double(g), n));
  CHECK(optim::clip(norm.squared(), total * 1.001).grad_scale == 1.0);
  const double clipped = optim::clip(norm.squared(), total * 0.999).grad_scale;
  CHECK(clipped < 1.0);
  CHECK(clipped == doctest::Approx(0.999).epsilon(1e-5));
}

TEST_CASE_FIXTURE(
    test::Gpu,
    "the scale kernel multiplies every element and clipped gradients have norm max_norm") {
  vk::Device& dev = device();
  for (uint32_t n : {1u, 257u, 4099u}) {
    const auto x = test::random_vector(n, 30 + n, -4.0f, 4.0f);
    vk::Buffer xb = test::to_device(dev, x, "x", Category::Gradients);
    const optim::GradNorm norm(dev, {xb});
    vk::Commands cmd(dev, "clip");
    norm.record(cmd);
    cmd.run();
    const double max_norm = 0.5;
    const optim::Clip c = optim::clip(norm.squared(), max_norm);
    REQUIRE(c.grad_scale < 1);
    cmd.reset();
    optim::scale(cmd, xb, n, float(c.grad_scale));
    norm.record(cmd);
    cmd.run();
    auto want = test::to_double(x);
    ref::scale<double>(want, n, float(c.grad_scale));
    test::check_close(test::to_host(xb), test::to_float(want), 0, 1e-7,
                      "scale n=" + std::to_string(n));
    CHECK(std::sqrt(norm.squared()) == doctest::Approx(max_norm).epsilon(1e-5));
  }
}

TEST_CASE_FIXTURE(test::Gpu, "folding the clip into the step equals scaling the gradients first") {
  // Three steps under three scales: AdamW's first step moves by about the learning rate
  // whatever the gradients' scale, so a step that dropped its scale would pass one step; over
  // steps of different scales m / sqrt(v) no longer cancels it.
  vk::Device& dev = device();
  const uint32_t n = 1000;
  const auto p0 = test::random_vector(n, 40), g = test::random_vector(n, 41);
  vk::Buffer pa = test::to_device(dev, p0, "pa", Category::Parameters),
             pb = test::to_device(dev, p0, "pb", Category::Parameters),
             ga = test::to_device(dev, g, "ga", Category::Gradients),
             gb = test::to_device(dev, g, "gb", Category::Gradients);
  optim::AdamW folded({0.9, 0.999, 1e-8, 0.01}), separate({0.9, 0.999, 1e-8, 0.01});
  folded.add("p", pa, ga);
  separate.add("p", pb, gb);
  uint32_t step = 0;
  for (const float scale : {0.3f, 0.7f, 0.45f}) {
    vk::upload(gb, g.data(), n * 4);  // scaled in place by the step before
    vk::Commands cmd(dev, "clip");
    folded.record(cmd, {++step, 0.01, scale});
    optim::scale(cmd, gb, n, scale);
    separate.record(cmd, {step, 0.01, 1.0});
    cmd.run();
  }
  test::check_close(test::to_host(pa), test::to_host(pb), 0, 0, "folded vs separate clip");
  // Not the parameters a step with no scale at all makes.
  vk::Buffer pc = test::to_device(dev, p0, "pc", Category::Parameters),
             gc = test::to_device(dev, g, "gc", Category::Gradients);
  optim::AdamW unscaled({0.9, 0.999, 1e-8, 0.01});
  unscaled.add("p", pc, gc);
  for (uint32_t s = 1; s <= 3; ++s) {
    vk::Commands cmd(dev, "unscaled");
    unscaled.record(cmd, {s, 0.01, 1.0});
    cmd.run();
  }
  const std::vector<float> a = test::to_host(pa), c = test::to_host(pc);
  double apart = 0;
  for (uint32_t i = 0; i < n; ++i) apart = std::max(apart, double(std::abs(a[i] - c[i])));
  CHECK(apart > 1e-5);
}

TEST_CASE_FIXTURE(
    test::Gpu,
    "an optimizer over two stages updates each stage's parameters from that stage's commands") {
  const auto p0 = test::random_vector(64, 50), g = test::random_vector(64, 51);
  vk::Buffer p_a = test::to_device(device(0), p0, "stage0.w", Category::Parameters),
             g_a = test::to_device(device(0), g, "stage0.w.grad", Category::Gradients),
             p_b = test::to_device(device(1), p0, "stage1.w", Category::Parameters),
             g_b = test::to_device(device(1), g, "stage1.w.grad", Category::Gradients);
  optim::Sgd sgd({0.9, 0, false});
  sgd.add("stage0.w", p_a, g_a);
  sgd.add("stage1.w", p_b, g_b);
  vk::Commands cmd(device(0), "stage 0 step");
  sgd.record(cmd, {1, 0.5, 1.0});
  cmd.run();
  CHECK(cmd.dispatches() == 1);
  auto want = test::to_double(p0);
  std::vector<double> buf(64);
  ref::sgd_step<double>(want, test::to_double(g), buf, 64, sgd.options(), {1, 0.5, 1.0});
  test::check_close(test::to_host(p_a), test::to_float(want), 1e-6, 1e-6, "stage 0 parameter");
  test::check_close(test::to_host(p_b), p0, 0, 0, "stage 1 parameter, not yet stepped");
  const auto state = sgd.state();
  REQUIRE(state.size() == 2);
  CHECK(state[0].first == "stage0.w.momentum_buffer");
  CHECK(&state[1].second->device() == &device(1));
  CHECK(state[1].second->category() == Category::Optimizer);
}

TEST_CASE("optimizer options torch refuses are refused with one line") {
  CHECK_THROWS_WITH_AS(optim::Sgd({0, 0, true}), doctest::Contains("Nesterov"), UserError);
  CHECK_THROWS_AS(optim::Sgd({-0.1, 0, false}), UserError);
  CHECK_THROWS_AS(optim::Sgd({0.9, -1, false}), UserError);
  CHECK_THROWS_WITH_AS(optim::AdamW({0.9, 1.0, 1e-8, 0}), doctest::Contains("`beta2` 1 "), UserError);
  CHECK_THROWS_AS(optim::AdamW({0.9, 0.999, -1, 0}), UserError);
}

TEST_CASE("a constant schedule gives the base rate at every step") {
  const auto s = optim::constant(0.05);
  for (uint64_t step : {0ull, 1ull, 1000ull, 1000000ull})
    CHECK(optim::learning_rate(s, step) == 0.05);
}

TEST_CASE("warmup then cosine has the defined values at its boundaries") {
  const double base = 0.1, min = 0.01;
  const auto s = optim::warmup_cosine(base, min, 10, 110);
  CHECK(optim::learning_rate(s, 0) == doctest::Approx(base / 10));
  CHECK(optim::learning_rate(s, 4) == doctest::Approx(base * 5 / 10));
  CHECK(optim::learning_rate(s, 9) == doctest::Approx(base));   // warmup ends at the base rate
  CHECK(optim::learning_rate(s, 10) == doctest::Approx(base));  // decay starts at it too
  CHECK(optim::learning_rate(s, 60) == doctest::Approx((base + min) / 2));  // half-way
  const double last = optim::learning_rate(s, 109);
  CHECK(last > min);
  CHECK(last ==
        doctest::Approx(min + (base - min) * (1 + std::cos(std::numbers::pi * 99 / 100)) / 2));
  CHECK(optim::learning_rate(s, 110) == min);
  CHECK(optim::learning_rate(s, 100000) == min);
  for (uint64_t step = 10; step < 110; ++step)
    CHECK(optim::learning_rate(s, step + 1) < optim::learning_rate(s, step));
  const auto no_warmup = optim::warmup_cosine(base, min, 0, 100);
  CHECK(optim::learning_rate(no_warmup, 0) == base);
  const auto only_warmup = optim::warmup_cosine(base, min, 5, 5);
  CHECK(optim::learning_rate(only_warmup, 4) == doctest::Approx(base));
  CHECK(optim::learning_rate(only_warmup, 5) == min);
}

TEST_CASE("schedules with impossible settings are refused with one line") {
  CHECK_THROWS_WITH_AS(optim::warmup_cosine(0.1, 0.01, 20, 10), doctest::Contains("`warmup_steps` 20"),
                       UserError);
  CHECK_THROWS_WITH_AS(optim::warmup_cosine(0.1, 0.2, 0, 10), doctest::Contains("`min_lr` 0.2"),
                       UserError);
  CHECK_THROWS_AS(optim::warmup_cosine(0.1, 0.0, 0, 0), UserError);
  CHECK_THROWS_AS(optim::constant(0), UserError);
  CHECK_THROWS_AS(optim::constant(-1e-3), UserError);
}

}  // namespace kernels_optim_test
