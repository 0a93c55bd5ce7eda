// The bench commands end to end: what they refuse before timing anything, and the figures
// they derive from what they measured.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "run.h"

namespace cli_bench_refusals_test {

using namespace brigade;

TEST_CASE("bench commands refuse bad lists and runs with nothing to measure before timing any case, in one line") {
  const std::string pipeline = "bench pipeline --model fashion-mlp -b 8 --reps 1 ";
  const std::string schedules = "bench schedules --model fashion-mlp -b 8 --stages 2 --reps 1 ";
  for (const auto& [args_, says_] : std::vector<std::pair<std::string, std::string>>{
           {pipeline + "--stages 1 -m 1,16", "--micro-batches: 16 is not between 1 and the 8 samples of a mini-batch"},
           {pipeline + "--stages 1 -m 0", "--micro-batches: 0 is not between 1 and the 8"},
           {pipeline + "--stages 1 -m 1 --svg /nonexistent-bench-folder", "--svg: bubble.svg charts the bubble of K > 1 stages"},
           {schedules + "-m 2 --schedules gpipe,bogus", "--schedules: 'bogus' is not a schedule"},
           {schedules + "-m 2,16 --schedules gpipe", "--micro-batches: 16 is not between 1"},
           {schedules + "-m 1,3 --schedules interleaved", "--schedules interleaved: it runs only where M is a multiple of --stages 2"},
           {"bench partition --model fashion-mlp -b 8 --plan auto --rounds 1 --steps 1", "--plan auto: bench partition compares"}}) {
    const std::string &args = args_, &says = says_;  // references: doctest's messages capture them
    const auto r = test::brigade_run(args);
    INFO(args, "\n", r.output);
    CHECK(r.status == 2);
    CHECK(r.output.rfind("brigade: error: ", 0) == 0);  // the first line: nothing timed before it
    CHECK(r.output.find(says) != std::string::npos);
    CHECK(r.output.find('\n') == r.output.size() - 1);
  }
}

TEST_CASE("bench pipeline compares each K with K=1 at the same M wherever --stages puts K=1") {
  const auto r = test::brigade_run("bench pipeline --model fashion-mlp -b 4 --stages 2,1 -m 2 --reps 1 --json");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto rows = nlohmann::json::parse(r.output).at("results");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].at("stages") == 2);
  REQUIRE(rows[0].at("relative_to_one_stage").is_number());
  CHECK(rows[0].at("relative_to_one_stage").get<double>() ==
        doctest::Approx(rows[0].at("samples_per_s").get<double>() / rows[1].at("samples_per_s").get<double>()));
  CHECK(rows[1].at("relative_to_one_stage").get<double>() == 1.0);
}

TEST_CASE("bench schedules --svg checks both its charts before timing") {
  const std::filesystem::path dir = test::scratch_dir("bench-schedules-svg");
  std::filesystem::create_directories(dir / "schedule-bubble.svg");  // a folder where the chart would go
  const auto r = test::brigade_run("bench schedules --model fashion-mlp -b 4 --stages 2 -m 2 --reps 1 --schedules gpipe --svg " +
                                   dir.string());
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.rfind("brigade: error: ", 0) == 0);
  CHECK(r.output.find("schedule-bubble.svg") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("bench planner refuses a grid of fewer than two distinct configurations instead of comparing the choice with itself") {
  // Within 1x of the choice: only configurations that run as it does. The precision fixed: a
  // 16-bit configuration the planner ranks after the choice (it must beat fp32 by a margin)
  // may be predicted a little faster on a noisy machine, so within 1x of it.
  const auto r = test::brigade_run("bench planner --model fashion-mlp -b 8 --devices 0 --precision fp32 --grid 4 --within 1 --rounds 1");
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find("brigade: error: --within 1: the ") != std::string::npos);
  CHECK(r.output.find("raise --within") != std::string::npos);
  CHECK(r.output.find("opening ") == std::string::npos);
  CHECK(r.output.find("Spearman") == std::string::npos);
}

}  // namespace cli_bench_refusals_test
