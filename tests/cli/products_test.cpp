// brigade bench products end to end: the products it times are the step's, as bench profile
// counts them, and every tiling that computes one agrees with its default.
#include <doctest/doctest.h>

#include <map>
#include <string>

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

}  // namespace cli_products_test
