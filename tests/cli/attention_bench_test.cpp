// brigade bench attention end to end: flash attention on matrix tiles under the default blocks
// and the others asked for, each checked against the default first, the default first in the
// table; on lavapipe, which has no matrix units, on plain invocations, and saying so.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "run.h"

namespace cli_attention_bench_test {

using namespace brigade;

TEST_CASE("bench attention: the default blocks and the others asked for, each agreeing with the default") {
  const auto r = test::brigade_run("bench attention --shape 2x40x32x2 --warps 2 --blocks 2,4 --reps 2 --json");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.output);
  REQUIRE(j["shapes"].size() == 1);
  const auto& s = j["shapes"][0];
  CHECK(s["shape"] == "2x40x32x2");
  CHECK(s["plain"] == true);  // lavapipe lists no bf16 matrix product
  REQUIRE(s["tilings"].size() == 3);  // the default (4 warps, blocks of 2), and 2 warps with blocks of 2 and 4
  CHECK(s["tilings"][0]["default"] == true);
  std::set<uint32_t> blocks;
  for (const auto& t : s["tilings"]) {
    INFO(t.dump());
    CHECK(t["forward_ms"].get<double>() > 0);
    CHECK(t["query_ms"].get<double>() > 0);
    CHECK(t["key_value_ms"].get<double>() > 0);
    CHECK(t["backward_ms"].get<double>() == doctest::Approx(t["query_ms"].get<double>() + t["key_value_ms"].get<double>()));
    CHECK(t["disagreement"].get<double>() <= 1);
    CHECK(t["blocks"][0] == t["blocks"][2]);  // one tiling for every pass
    blocks.insert(t["blocks"][0].get<uint32_t>());
  }
  CHECK(blocks == std::set<uint32_t>{16, 32});  // in 8x8x8 matrices
  CHECK(s["tilings"][1]["warps"][0] == 2);
}

// BRIGADE_ATTENTION_BLOCKS puts other blocks in the default's place, as it does for every
// command's attention on matrix tiles; what is not blocks of whole matrices is refused.
TEST_CASE("bench attention: BRIGADE_ATTENTION_BLOCKS's blocks are the default's") {
  auto r = test::command_run("BRIGADE_ATTENTION_BLOCKS=2,32 " BRIGADE_EXE
                             " bench attention --shape 2x40x32x2 --warps 1 --blocks 2 --reps 1 --json");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.output);
  const auto& tilings = j["shapes"][0]["tilings"];
  REQUIRE(tilings.size() == 2);
  CHECK(tilings[0]["default"] == true);
  CHECK(tilings[0]["blocks"][0] == 32);
  CHECK(tilings[0]["warps"][0] == 2);
  CHECK(tilings[1]["blocks"][0] == 16);
  // Each pass's own: the forward's, the queries' pass's, the keys' pass's.
  r = test::command_run("BRIGADE_ATTENTION_BLOCKS='2,16;1,32;4,8' " BRIGADE_EXE
                        " bench attention --shape 2x40x32x2 --warps 1 --blocks 2 --reps 1 --json");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto per_pass = nlohmann::json::parse(r.output)["shapes"][0]["tilings"][0];
  CHECK(per_pass["blocks"] == nlohmann::json::array({16, 32, 8}));
  CHECK(per_pass["up_to_warps"] == nlohmann::json::array({2, 1, 4}));
  CHECK(per_pass["tiling"] == "plain 8x8x8, 2/1/4 warps of 8, blocks of 16/32/8");
  r = test::command_run("BRIGADE_ATTENTION_BLOCKS='2,16;1,32' " BRIGADE_EXE " bench attention --shape 2x40x32x2");
  CHECK(r.status == 2);
  CHECK(r.output.find("or three such separated by ';'") != std::string::npos);
  r = test::command_run("BRIGADE_ATTENTION_BLOCKS=1,1024 " BRIGADE_EXE " bench attention --shape 2x40x32x2");
  CHECK(r.status == 2);
  CHECK(r.output.find("the default tiling (matrix tiles on plain invocations 8x8x8, up to 1 warps of 8, blocks of 1024) "
                      "does not fit") != std::string::npos);
  r = test::command_run("BRIGADE_ATTENTION_BLOCKS=2,12 " BRIGADE_EXE " bench attention --shape 2x40x32x2");
  CHECK(r.status == 2);
  CHECK(r.output.find("BRIGADE_ATTENTION_BLOCKS=2,12: blocks of 12 rows are not a multiple of the matrices' 8") !=
        std::string::npos);
  r = test::command_run("BRIGADE_ATTENTION_BLOCKS=4 " BRIGADE_EXE " bench attention --shape 2x40x32x2");
  CHECK(r.status == 2);
  CHECK(r.output.find("BRIGADE_ATTENTION_BLOCKS is '4'; expected WARPS,ROWS") != std::string::npos);
}

TEST_CASE("bench attention refuses a shape, a precision or heads it cannot take, in one line, and takes auto as the device's type") {
  auto r = test::brigade_run("bench attention --shape 2x40x32");
  CHECK(r.status == 2);
  CHECK(r.output.find("--shape 2x40x32: expected BxTxCxNH") != std::string::npos);
  // Each part a whole number above 0 in decimal digits, not one a signed read wraps round.
  for (const auto& [shape_, part_] : std::vector<std::pair<std::string, std::string>>{
           {"-1x16x32x1", "B '-1' is not one"}, {"2x16x32x0", "NH '0' is not one"},
           {"2x16xx1", "C '' is not one"}, {"2x16x32x1x1", "it has more than four parts"}, {"2x16x32x1z", "NH '1z' is not one"}}) {
    const std::string &shape = shape_, &part = part_;
    r = test::brigade_run("bench attention --shape=" + shape);
    INFO(shape, "\n", r.output);
    CHECK(r.status == 2);
    CHECK(r.output == "brigade: error: --shape " + shape +
                          ": expected BxTxCxNH, four whole numbers above 0 (samples, tokens, channels, heads); " + part +
                          "\n");
  }
  r = test::brigade_run("bench attention --shape 2x40x33x2");
  CHECK(r.status == 2);
  CHECK(r.output.find("C (33) is not a multiple of NH") != std::string::npos);
  r = test::brigade_run("bench attention --precision fp32");
  CHECK(r.status == 2);
  CHECK(r.output.find("reads 16-bit qkv") != std::string::npos);
  // auto: the device's 16-bit type (`brigade devices`), never refused.
  r = test::brigade_run("bench attention --precision auto --shape 1x16x16x2 --warps 1 --blocks 2 --reps 1 --json");
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.output)["precision"] == test::precision_auto());
  r = test::brigade_run("bench attention --shape 2x40x12x3 --warps 2 --blocks 2");
  CHECK(r.status == 2);
  CHECK(r.output.find("takes heads of 4 (multiples of 8)") != std::string::npos);
  // SwiftShader: no matrix units, and minutes of compiling for the plain build.
  r = test::command_run(std::string("VK_ADD_DRIVER_FILES=") + BRIGADE_DRIVERS_DIR +
                        "/swiftshader/vk_swiftshader_icd.json " BRIGADE_EXE " bench attention --device swiftshader");
  CHECK(r.status == 2);
  CHECK(r.output.find("SwiftShader has no matrix units, so Brigade never runs flash attention on matrix tiles there") !=
        std::string::npos);
}

}  // namespace cli_attention_bench_test
