// Two vendors in one pipeline: Mesa's lavapipe (subgroups of 8) and Google's SwiftShader
// (subgroups of 4), each stage on its own driver, boundaries crossing between them through
// host memory imported into both or through staging copies. Whatever the device mix, the
// loss, every gradient, three AdamW steps and evaluation equal one lavapipe device's run with
// the same micro-batches, under each schedule. Every test runs under the validation layer on
// both drivers.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "equivalence.h"
#include "gpu.h"
#include "model/model.h"
#include "pipeline/batch.h"

using namespace brigade;
using pipeline::LinkKind;
using pipeline::Remat;
using test::PipelineConfig;

namespace {

const std::vector<std::string> kTwo{"llvmpipe", "swiftshader"};
const std::vector<std::string> kThree{"llvmpipe", "swiftshader", "llvmpipe"};

std::vector<vk::Device*> devices(test::Gpu& gpu, const std::vector<std::string>& names) {
  std::vector<vk::Device*> out;
  for (size_t k = 0; k < names.size(); ++k) out.push_back(&gpu.device_on(names[k], k));
  return out;
}

std::string describe(const std::vector<std::string>& names, const PipelineConfig& c) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ",") + n;
  return s + " " + test::describe(c);
}

// `schedules`: also the zb, interleaved and 1f1b schedules.
void check_model(test::Gpu& gpu, const std::string& preset, uint32_t rows, bool schedules,
                 const std::vector<std::string>& set = {}) {
  const model::Model m = model::build(preset, set);
  const std::vector<pipeline::Batch> batches{pipeline::random_batch(m, rows, 1), pipeline::random_batch(m, rows, 2),
                                             pipeline::random_batch(m, rows, 3)};
  // The single-device runs: one lavapipe device with the same micro-batches (which
  // BatchNorm's per-micro-batch statistics make part of the model's definition).
  const std::vector<vk::Device*> one{&gpu.device_on("llvmpipe", 0)};
  std::map<uint32_t, test::Outcome> reference;
  for (uint32_t M : {1u, 4u, 8u}) reference[M] = test::run(m, one, {M}, batches, 0);

  // At K = 2 and at K = 3, every M, every remat mode and every path the pair can take (auto
  // takes host), each at least once.
  std::vector<std::pair<std::vector<std::string>, PipelineConfig>> runs;
  for (const auto* names : {&kTwo, &kThree}) {
    const bool two = names == &kTwo;
    runs.push_back({*names, {1, Remat::Never, two ? LinkKind::Auto : LinkKind::Staging}});
    runs.push_back({*names, {4, two ? Remat::Always : Remat::ExceptLast, two ? LinkKind::Host : LinkKind::Auto}});
    runs.push_back({*names, {8, two ? Remat::ExceptLast : Remat::Always, two ? LinkKind::Staging : LinkKind::Host}});
  }
  // The other schedules across the pair (on the cheaper presets, CI time): zero-bubble's split
  // backward, interleaved cells whose boundaries cross between the drivers three times, 1f1b
  // over the three-stage mix.
  if (schedules) {
    runs.push_back({kTwo, {4, Remat::Never, LinkKind::Auto, pipeline::ScheduleKind::ZeroBubble}});
    runs.push_back({kTwo, {4, Remat::Always, LinkKind::Staging, pipeline::ScheduleKind::Interleaved, 2}});
    runs.push_back({kThree, {8, Remat::ExceptLast, LinkKind::Auto, pipeline::ScheduleKind::OneFOneB}});
  }
  for (const auto& [names, c] : runs)
    test::check_equal(test::run(m, devices(gpu, names), c, batches, 0), reference.at(c.M),
                      preset + " " + describe(names, c), false);

  // Three AdamW steps with clipping, on the three-stage mix (both drivers, two boundaries):
  // the same parameters as on one device. AdamW divides each
  // gradient by its own running magnitude, so the two drivers' different summation orders
  // (subgroups of 4 and 8) reach the parameters less damped than through SGD: they agree to
  // a thousandth of the steps' largest move (3 steps of lr 1e-3), a wrong pipeline is off by
  // whole steps.
  const PipelineConfig trained{4, Remat::ExceptLast, LinkKind::Auto};
  const test::Outcome want = test::run(m, one, trained, batches, 3, test::Update::AdamW);
  CHECK(want.losses[2] != want.losses[0]);  // the steps did change the model
  test::check_equal(test::run(m, devices(gpu, kThree), trained, batches, 3, test::Update::AdamW), want,
                    preset + " 3 AdamW steps " + describe(kThree, trained), true, 3e-6);

  // Evaluation on the three-stage mix: loss, correct count and every output.
  const PipelineConfig c{4, Remat::Always, LinkKind::Auto};
  test::check_equal(test::evaluate(m, devices(gpu, kThree), c, batches[0]), test::evaluate(m, one, {1}, batches[0]),
                    preset + " evaluation " + describe(kThree, c));
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "the suite sees both drivers: lavapipe and SwiftShader") {
  const vk::PhysicalInfo& lavapipe = device_on("llvmpipe", 0).info();
  const vk::PhysicalInfo& swiftshader = device_on("swiftshader", 1).info();
  CHECK(lavapipe.driver_id == VK_DRIVER_ID_MESA_LLVMPIPE);
  CHECK(swiftshader.driver_id == VK_DRIVER_ID_GOOGLE_SWIFTSHADER);
  CHECK(swiftshader.vendor == "Google");
  CHECK(lavapipe.subgroup_size != swiftshader.subgroup_size);
}

TEST_CASE_FIXTURE(test::Gpu, "fashion-mlp across lavapipe and SwiftShader equals one device") {
  check_model(*this, "fashion-mlp", 10, true);  // 10 rows: M=4 and M=8 split unevenly
}

TEST_CASE_FIXTURE(test::Gpu, "fashion-cnn across lavapipe and SwiftShader equals one device") {
  check_model(*this, "fashion-cnn", 8, false);  // uneven splits: fashion-mlp here, every preset in the pipeline suite
}

TEST_CASE_FIXTURE(test::Gpu, "fashion-cnn-bn across lavapipe and SwiftShader equals one device") {
  check_model(*this, "fashion-cnn-bn", 8, false);
}

TEST_CASE_FIXTURE(test::Gpu, "gpt-mini across lavapipe and SwiftShader equals one device, tied embedding included") {
  // gpt-mini's heads and width, with two of its four blocks, on a block of 16 tokens (its
  // own is 128), so that SwiftShader, several times slower than lavapipe, keeps the suite short.
  check_model(*this, "gpt-mini", 8, true, {"block_size=16", "n_layer=2"});
}

TEST_CASE_FIXTURE(test::Gpu, "a path the pair cannot take is refused naming both drivers, before anything is allocated") {
  vk::Device& a = device_on("llvmpipe", 0);
  vk::Device& b = device_on("swiftshader", 1);
  const uint64_t before = a.memory().stats().total_peak + b.memory().stats().total_peak;
  CHECK_THROWS_WITH_AS(pipeline::choose_link(a, b, LinkKind::Fd),
                       doctest::Contains("(llvmpipe) and device"), UserError);
  CHECK_THROWS_WITH_AS(pipeline::choose_link(a, b, LinkKind::Fd), doctest::Contains("(SwiftShader driver)"), UserError);
  CHECK(a.memory().stats().total_peak + b.memory().stats().total_peak == before);
  const pipeline::LinkChoice auto_choice = pipeline::choose_link(a, b, LinkKind::Auto);
  CHECK(auto_choice.kind == LinkKind::Host);
  CHECK(auto_choice.why.find("not fd") != std::string::npos);
  CHECK(pipeline::choose_link(a, b, LinkKind::Staging).kind == LinkKind::Staging);
}
