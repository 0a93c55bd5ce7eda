// A step whose loss or gradients are not finite updates nothing and names the step, the
// stage and its device, and the layer.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gpu.h"
#include "model/model.h"
#include "optim/sgd.h"
#include "pipeline/executor.h"
#include "pipeline/plan.h"

namespace pipeline_non_finite_test {

using namespace brigade;

namespace {

pipeline::Batch image_batch(const model::Model& m, uint32_t rows) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  pipeline::Batch b;
  b.rows = rows;
  for (uint64_t i = 0; i < rows * model::elements(m.input); ++i) b.images.push_back(u(rng));
  for (uint32_t r = 0; r < rows; ++r) b.targets.push_back(int32_t(1 + r % (m.classes - 1)));  // never class 0
  return b;
}

struct Fixture {
  const model::Model m = model::build("fashion-mlp");  // 0 flatten, 1 linear, 2 relu, 3 linear, 4 relu, 5 linear
  pipeline::Plan plan;
  std::unique_ptr<pipeline::Executor> ex;
  optim::Sgd sgd{optim::SgdOptions{.momentum = 0.9}};

  // `capped`: each device capped at its stage's planned total, which the checks must not pass.
  explicit Fixture(test::Gpu& gpu, bool capped = false) {
    pipeline::PlanOptions o;
    o.rows = 8, o.micro_batches = 2, o.optimizer_states = 1;
    o.stages.assign(2, pipeline::StageSpec{});
    o.balance = {4, 2};  // stage 0: layers 0-3, stage 1: layers 4-5
    // What the devices hold besides the cells' tensors (a staging buffer where the host does
    // not map their memory), as `brigade train` plans it.
    const vk::PhysicalInfo info = test::instance().describe_devices().at(test::test_device_index());
    for (pipeline::StageSpec& st : o.stages) st.facts = pipeline::device_facts(m, info);
    plan = pipeline::plan(m, o);
    const auto cap = [&](uint32_t k) { return capped ? pipeline::total(plan.stage_memory(k, 1)) : 0; };
    ex = std::make_unique<pipeline::Executor>(m, std::vector<vk::Device*>{&gpu.device(0, cap(0)), &gpu.device(1, cap(1))}, plan,
                                              pipeline::ExecutorOptions{});
    for (const model::ParamSpec& p : m.params()) ex->set_parameter(p.name, model::initial_values(p, 1));
    ex->attach(sgd);
  }
  std::map<std::string, std::vector<float>> params() const {
    std::map<std::string, std::vector<float>> all;
    for (const model::ParamSpec& p : m.params()) all[p.name] = ex->parameter(p.name);
    return all;
  }
  // Trains one step and returns what it threw ("" when it did not).
  std::string step() {
    try {
      ex->train(image_batch(m, 8), {&sgd, optim::Step{7, 0.1, 1}, 0});
    } catch (const pipeline::NonFinite& e) {
      return e.what();
    }
    return {};
  }
};

void check_mentions(const std::string& message, const std::vector<std::string>& parts) {
  INFO(message);
  for (const std::string& p : parts) CHECK_MESSAGE(message.find(p) != std::string::npos, "missing: ", p);
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "a finite step reports the gradient norm, clipping or not") {
  Fixture f(*this);
  const pipeline::StepResult r = f.ex->train(image_batch(f.m, 8), {&f.sgd, optim::Step{1, 0.1, 1}, 0});
  double squared = 0;
  for (const model::ParamSpec& p : f.m.params())
    for (float g : f.ex->gradient(p.name)) squared += double(g) * g;
  CHECK(r.grad_norm == doctest::Approx(std::sqrt(squared)).epsilon(1e-5));
}

TEST_CASE_FIXTURE(test::Gpu, "a parameter that is already NaN is named, and nothing is updated") {
  Fixture f(*this);
  std::vector<float> w = f.ex->parameter("3.weight");
  w[5] = std::numeric_limits<float>::quiet_NaN();
  f.ex->set_parameter("3.weight", w);
  const auto before = f.params();
  const std::string what = f.step();
  // Whether the loss is NaN too depends on the device (max() with a NaN operand is undefined
  // in SPIR-V); the parameter is named either way.
  check_mentions(what, {"step 7: ", "parameter '3.weight'", "layer 3, linear",
                        "stage 0 (device " + std::to_string(device(0).info().index), "no parameter was updated"});
  const auto after = f.params();
  for (const auto& [name_, v] : before) {  // NaN != NaN: compare the bits
    const std::string& name = name_;  // a reference: doctest's messages capture it
    CHECK_MESSAGE(std::memcmp(v.data(), after.at(name).data(), v.size() * 4) == 0, name, " changed");
  }
}

// The search for a non-finite parameter allocates nothing past the plan: at caps of exactly
// the planned totals it still names the parameter rather than run out of memory.
TEST_CASE_FIXTURE(test::Gpu, "a NaN parameter is named on devices capped at exactly the plan") {
  Fixture f(*this, true);
  std::vector<float> w = f.ex->parameter("1.weight");
  w[9] = std::numeric_limits<float>::quiet_NaN();
  f.ex->set_parameter("1.weight", w);
  check_mentions(f.step(), {"step 7: ", "parameter '1.weight'", "layer 1, linear", "no parameter was updated"});
}

TEST_CASE_FIXTURE(test::Gpu, "a gradient that overflows is named at the deepest layer, and nothing is updated") {
  Fixture f(*this);
  // Class 0's logit becomes huge but finite, so the loss stays finite; the gradient reaching
  // layer 3 through it is ~1e25, whose squares overflow fp32.
  std::vector<float> w = f.ex->parameter("5.weight");
  for (size_t j = 0; j < 128; ++j) w[j] = 1e25f;
  f.ex->set_parameter("5.weight", w);
  const auto before = f.params();
  const std::string what = f.step();
  check_mentions(what, {"step 7: the gradient of '3.bias'", "layer 3, linear", "stage 0", "non-finite norm",
                        "no parameter was updated"});
  CHECK(what.find("loss") == std::string::npos);
  CHECK(f.params() == before);
}

}  // namespace pipeline_non_finite_test
