// brigade bench products end to end: the products it times are the step's, as bench profile
// counts them, and every tiling that computes one agrees with its default; the tilings --save
// keeps are the ones later commands take.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run.h"

namespace cli_products_test {

using namespace brigade;

const std::string kTinyGpt = "--model gpt-mini --set n_layer=1 --set n_head=2 --set n_embd=32 --set block_size=16 -b 2";

TEST_CASE("bench products: each product of bench profile's micro-batch, under its default and every other tiling") {
  const auto profile = test::brigade_run("bench profile " + kTinyGpt + " --reps 1 --json");
  INFO(profile.output);
  REQUIRE(profile.status == 0);
  std::map<std::string, uint32_t> profiled;  // dispatches by shape
  const auto p = nlohmann::json::parse(profile.output);
  for (const auto& s : p["products"]) profiled[s["shape"]] += s["dispatches"].get<uint32_t>();

  // It exits 0 only where every tiling it ran agreed with the default's C.
  const auto r = test::brigade_run("bench products " + kTinyGpt + " --reps 2 --json");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.output);
  std::map<std::string, uint32_t> captured;
  uint32_t count = 0, candidates = 0;
  double by_default = 0, fastest = 0;
  for (const auto& s : j["shapes"]) {
    INFO(s.dump());
    captured[s["shape"]] += s["count"].get<uint32_t>();
    count += s["count"].get<uint32_t>();
    const double ms = s["default"]["ms"], best = s["fastest"]["ms"];
    CHECK(ms > 0);
    CHECK(best <= ms);
    CHECK(s["default"]["gflops"].get<double>() == doctest::Approx(s["flops"].get<double>() / (ms * 1e6)));
    by_default += s["count"].get<uint32_t>() * ms, fastest += s["count"].get<uint32_t>() * best;
    for (const auto& c : s["candidates"]) {
      ++candidates;
      if (c.contains("not_run")) continue;
      CHECK(c["disagreement"].get<double>() <= 1);
      CHECK(c["agrees"] == true);
      CHECK(c["ms"].get<double>() >= best);
    }
  }
  // The same products as the profile's, shape by shape: the attention products of each head
  // (causal), the block's Linears with their bias and GELU, lm_head, and their gradients.
  CHECK(captured == profiled);
  CHECK(count == j["products"].get<uint32_t>());
  CHECK(captured["16x16x16 B^T x4 causal"] >= 1);
  CHECK(candidates > j["shapes"].size());  // lavapipe has several register blocks to try
  CHECK(j["default_ms"].get<double>() == doctest::Approx(by_default));
  CHECK(j["fastest_ms"].get<double>() == doctest::Approx(fastest));
}


// How many lines of `output` hold `part`.
size_t lines_with(const std::string& output, const std::string& part) {
  size_t n = 0;
  for (size_t at = 0; (at = output.find(part, at)) != std::string::npos; at += part.size()) ++n;
  return n;
}

TEST_CASE("bench products --save: the tilings it keeps are the ones later commands take, until --tilings default") {
  const std::filesystem::path dir = test::scratch_dir("products-save");
  const std::string env = "BRIGADE_CACHE_DIR=" + dir.string() + " " + BRIGADE_EXE + " ";
  const std::string mlp = "--model fashion-mlp -b 16";
  // Kept even where slower (a negative gain): the two shapes timed under the others each keep
  // their fastest other tiling.
  const auto saved = test::command_run(env + "bench products " + mlp + " --reps 1 --top 2 --save --min-gain -1e6 --json");
  INFO(saved.output);
  REQUIRE(saved.status == 0);
  const auto j = nlohmann::json::parse(saved.output.substr(saved.output.find('{')));
  std::vector<std::string> kept;
  for (const auto& s : j["shapes"])
    if (!s["saved"].is_null()) kept.push_back(s["shape"].get<std::string>());
  REQUIRE(kept.size() == 2);
  CHECK(j["saved"].get<std::string>().find("saved 2 tuned tiling(s)") == 0);
  std::ifstream in(dir / "tilings.json");
  const auto file = nlohmann::json::parse(in);
  REQUIRE(file["tilings"].size() == 1);
  CHECK(file["tilings"].begin()->size() == 2);

  // bench profile's step takes them: its products by shape name the tuned ones.
  const auto tuned = test::command_run(env + "bench profile " + mlp + " --reps 1");
  INFO(tuned.output);
  REQUIRE(tuned.status == 0);
  CHECK(lines_with(tuned.output, "tilings: 2 product(s) of ") == 1);
  for (const std::string& shape : kept) CHECK(lines_with(tuned.output, shape + " tuned  ") == 1);
  CHECK(lines_with(tuned.output, " tuned  ") == 2);  // a cell of the table, padded
  const auto plain = test::command_run(env + "bench profile " + mlp + " --reps 1 --tilings default");
  INFO(plain.output);
  REQUIRE(plain.status == 0);
  CHECK(lines_with(plain.output, "tuned") == 0);

  // A file Brigade did not write is ignored with one warning, and the step runs on the defaults.
  std::ofstream(dir / "tilings.json") << "{\"not\": \"tilings\"}";
  const auto garbage = test::command_run(env + "bench profile " + mlp + " --reps 1");
  INFO(garbage.output);
  CHECK(garbage.status == 0);
  CHECK(lines_with(garbage.output, "is not a tiling cache Brigade wrote") == 1);
  CHECK(lines_with(garbage.output, "tuned") == 0);

  // A cache that cannot be written is refused in one line before anything is timed.
  const std::filesystem::path not_a_folder = dir / "not-a-folder";
  std::ofstream(not_a_folder) << "x";
  const auto unwritable = test::command_run("BRIGADE_CACHE_DIR=" + not_a_folder.string() + " " + BRIGADE_EXE +
                                            " bench products " + mlp + " --reps 1 --top 1 --save");
  INFO(unwritable.output);
  CHECK(unwritable.status == 2);
  CHECK(lines_with(unwritable.output, "brigade: error: --save: could not write ") == 1);
  CHECK(lines_with(unwritable.output, "(Not a directory)") == 1);
  CHECK(lines_with(unwritable.output, " ms") == 0);  // nothing timed
  std::filesystem::remove_all(dir);
}

}  // namespace cli_products_test
