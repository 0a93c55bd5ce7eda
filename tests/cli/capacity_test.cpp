// brigade bench capacity end to end: GPipe's Table 1 under a tiny cap, and its refusals.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "run.h"
#include "xml_check.h"

namespace cli_capacity_test {

using namespace brigade;

TEST_CASE("bench capacity: the largest GPT under one cap grows with remat and stages, and trains") {
  const std::filesystem::path dir = test::scratch_dir("bench-capacity");
  const auto r = test::brigade_run(
      "bench capacity --mem-limit 4MiB --widths 32,64 -b 4 -m 4 --configs 1:never,1:always,2:always,4:always,1:never:gpipe:bf16 --json "
      "--svg " + dir.string());
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.output);
  // The chart: one line per remat mode.
  const std::string svg = test::slurp(dir / "capacity.svg");
  CHECK(test::xml_problem(svg).empty());
  CHECK(svg.find("remat always") != std::string::npos);
  CHECK(svg.find("remat never") != std::string::npos);
  std::filesystem::remove_all(dir);
  const uint64_t cap = j.at("cap_bytes");
  CHECK(cap == 4u << 20);
  const auto& rows = j.at("results");
  REQUIRE(rows.size() == 5);
  const uint64_t naive = rows[0].at("parameters");
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    INFO("row ", i, ": ", row.dump());
    // The planner's fullest stage fits; the step's measured peak is at most that plan (each
    // category peaks at its planned size, not all at once) and within 1% of it; one block more
    // does not fit.
    const uint64_t planned = row.at("planned_bytes"), peak = row.at("peak_bytes");
    CHECK(planned <= cap);
    CHECK(peak <= planned);
    CHECK(peak >= planned - planned / 100);
    CHECK(row.at("next_depth_bytes").get<uint64_t>() > cap);
    const double loss = row.at("loss");
    CHECK(std::isfinite(loss));
    CHECK(std::abs(loss - std::log(256.0)) < 0.5);  // random bytes at initialization
    CHECK(row.at("step_seconds").get<double>() > 0);
    // The row's model is the width whose largest depth holds the most parameters.
    uint64_t most = 0;
    for (const auto& w : row.at("widths"))
      if (!w.at("n_layer").is_null()) {
        most = std::max<uint64_t>(most, w.at("parameters"));
        if (w.at("n_embd") == row.at("n_embd")) CHECK(w.at("n_layer") == row.at("n_layer"));
      }
    CHECK(row.at("parameters").get<uint64_t>() == most);
    CHECK(row.at("n_embd").get<uint32_t>() == 32 * row.at("n_head").get<uint32_t>());  // gpt-mini's head size
    CHECK(row.at("relative_to_naive").get<double>() ==
          doctest::Approx(double(row.at("parameters").get<uint64_t>()) / double(naive)));
    if (i > 0 && i < 4) CHECK(row.at("parameters").get<uint64_t>() >= rows[i - 1].at("parameters").get<uint64_t>());
  }
  CHECK(rows[0]["stages"] == 1);
  CHECK(rows[0]["remat"] == "never");
  // Remat alone, then each doubling of the stages, fits strictly more.
  CHECK(rows[1]["parameters"].get<uint64_t>() > naive);
  CHECK(rows[3]["parameters"].get<uint64_t>() > rows[1]["parameters"].get<uint64_t>() * 3);
  // Activations in bf16 take half the bytes: without remat, where they outweigh the rest,
  // one stage holds a larger model.
  CHECK(rows[4]["precision"] == "bf16");
  CHECK(rows[0]["precision"] == "fp32");
  CHECK(rows[4]["parameters"].get<uint64_t>() > naive);
}

TEST_CASE("bench capacity refuses what it cannot grow, in one line and exit 2") {
  for (const auto& [args_, says_] : std::vector<std::pair<std::string, std::string>>{
           {"--model fashion-cnn", "fashion-cnn is not a GPT"},
           {"--mem-limit 64KiB --widths 32", "K=1 never: no n_embd of --widths fits under --mem-limit 64KiB"},
           {"--configs 8:always --mem-limit 256KiB --widths 32", "K=8 always: no n_embd"},
           {"--widths 48", "48 is not a positive multiple of gpt-mini's head size 32"},
           {"--configs 2:sometimes", "'sometimes' is not a remat mode"},
           {"--configs 2:always:gpipe:fp8", "'fp8' is not a precision"},
           {"--mem-limit 1MiB,2MiB", "is a list"}}) {
    const std::string &args = args_, &says = says_;  // references: doctest's messages capture them
    const auto r = test::brigade_run("bench capacity --no-step -b 4 -m 4 " + args);
    INFO(args, "\n", r.output);
    CHECK(r.status == 2);
    // The last line, after the progress of the rows searched before: the error.
    const size_t last = r.output.rfind('\n', r.output.size() - 2) + 1;
    CHECK(r.output.compare(last, 16, "brigade: error: ") == 0);
    CHECK(r.output.find(says, last) != std::string::npos);
  }
}

TEST_CASE("bench capacity --svg makes its folder and checks its chart before the search, and prints the table first") {
  const std::filesystem::path dir = test::scratch_dir("bench-capacity-svg");
  const std::string args = "bench capacity --widths 32 --configs 1:always --mem-limit 4MiB -b 2 -m 2 --no-step --svg ";
  // A folder that does not exist yet: made, the table printed and the chart written.
  const auto r = test::brigade_run(args + (dir / "new" / "sub").string());
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("the largest per row") != std::string::npos);
  CHECK(test::xml_problem(test::slurp(dir / "new" / "sub" / "capacity.svg")).empty());
  // A chart that cannot be written is refused before any depth is planned.
  std::filesystem::create_directories(dir / "taken" / "capacity.svg");
  const auto refused = test::brigade_run(args + (dir / "taken").string());
  INFO(refused.output);
  CHECK(refused.status == 2);
  CHECK(refused.output.find("capacity.svg") != std::string::npos);
  CHECK(refused.output.find("n_layer 1") == std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("bench capacity stops its search at --max-layers, says each depth it tries, and calls the bound at least") {
  const std::string args = "bench capacity --widths 32 --configs 1:always --mem-limit 1TiB -b 2 -m 2 --no-step --max-layers 8";
  const auto r = test::brigade_run(args);
  INFO(r.output);
  REQUIRE(r.status == 0);
  for (const char* probe : {"n_layer 1 fits", "n_layer 2 fits", "n_layer 4 fits", "n_layer 8 fits"})
    CHECK(r.output.find(std::string("K=1 always, n_embd 32: ") + probe) != std::string::npos);
  CHECK(r.output.find("n_layer 16") == std::string::npos);
  CHECK(r.output.find("at least 8 (") != std::string::npos);
  CHECK(r.output.find("not searched (--max-layers)") != std::string::npos);
  CHECK(r.output.find("the search stopped at --max-layers 8") != std::string::npos);
  const auto j = test::brigade_run(args + " --json");
  REQUIRE(j.status == 0);
  const auto row = nlohmann::json::parse(j.output).at("results").at(0);
  CHECK(row.at("n_layer") == 8);
  CHECK(row.at("at_max_layers") == true);
  CHECK(row.at("next_depth_bytes").is_null());
  CHECK(row.at("widths").at(0).at("at_max_layers") == true);
}

}  // namespace cli_capacity_test
