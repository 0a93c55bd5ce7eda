// The program across two vendors, end to end: `brigade devices` lists lavapipe and
// SwiftShader, --devices names them, step and train run across both with no --link flag and
// print nothing from either driver, a run moves from one device mix to another on resume,
// and the profile partition gives the slower driver fewer layers. Every command runs under
// the validation layer (run.h).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>

#include "../cli/run.h"
#include "check.h"
#include "io/safetensors.h"
#include "tiny_data.h"

namespace vendors_cli_test {

using namespace brigade;
using test::brigade_run;
namespace fs = std::filesystem;

namespace {

// What SwiftShader prints to stderr about a query it does not know (libVulkan.cpp's
// "WARNING: UNSUPPORTED: ...").
void check_no_driver_noise(const test::Result& r, const std::string& what) {
  CHECK_MESSAGE(r.output.find("WARNING") == std::string::npos, what, " printed driver noise:\n", r.output);
  CHECK_MESSAGE(r.output.find("UNSUPPORTED") == std::string::npos, what, " printed driver noise:\n", r.output);
}

// The layer count of each stage in `brigade plan`'s table ("0  1 llvmpipe (LLVM ...)  0-3
// conv2d..conv2d ..."), by driver.
std::map<std::string, int> layers_per_device(const std::string& plan) {
  std::map<std::string, int> out;
  std::istringstream in(plan);
  std::string line;
  while (std::getline(in, line)) {
    const size_t name_end = line.find(")  ");  // the device name ends in a parenthesis
    if (line.rfind("link", 0) == 0 || name_end == std::string::npos) continue;
    int first = 0, last = 0;
    if (std::sscanf(line.c_str() + name_end + 1, " %d-%d", &first, &last) != 2) continue;
    for (const char* name : {"llvmpipe", "SwiftShader"})
      if (line.find(name) < name_end) out[name] += last - first + 1;
  }
  return out;
}

}  // namespace

TEST_CASE("brigade devices lists lavapipe and SwiftShader with their vendors and nothing from the drivers") {
  const auto r = brigade_run("devices");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("SwiftShader Device") != std::string::npos);
  CHECK(r.output.find("llvmpipe") != std::string::npos);
  CHECK(r.output.find("Google") != std::string::npos);
  CHECK(r.output.find("Mesa") != std::string::npos);
  CHECK(r.output.find("0x1AE0") == std::string::npos);
  check_no_driver_noise(r, "devices");
  const auto json = brigade_run("devices --json");
  REQUIRE(json.status == 0);
  check_no_driver_noise(json, "devices --json");
}

TEST_CASE("--devices takes a part of a name or a UUID prefix, and refuses unknown or ambiguous ones with the list") {
  auto r = brigade_run("plan --model fashion-mlp --devices LLVMpipe,swiftSHADER");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("llvmpipe (LLVM") != std::string::npos);
  CHECK(r.output.find("SwiftShader Device") != std::string::npos);
  r = brigade_run("plan --model fashion-mlp --devices 53776966-7453");  // SwiftShader's deviceUUID
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("SwiftShader Device") != std::string::npos);
  r = brigade_run("plan --model fashion-mlp --devices llvmpipe,nvidia");
  CHECK(r.status == 2);
  CHECK(r.output.find("--devices: no device's name contains 'nvidia'") != std::string::npos);
  CHECK(r.output.find("SwiftShader Device (Subzero)") != std::string::npos);  // the list
  r = brigade_run("plan --model fashion-mlp --devices e");  // in both names
  CHECK(r.status == 2);
  CHECK(r.output.find("'e' names 2 devices") != std::string::npos);
}

TEST_CASE("brigade step across lavapipe and SwiftShader equals one device, with no --link flag") {
  const fs::path d = test::scratch_dir("vendors-step");
  const std::string p = (d / "p.safetensors").string(), b = (d / "b.safetensors").string();
  REQUIRE(brigade_run("init --model fashion-cnn --seed 4 --out " + p).status == 0);
  test::write_image_batch(b, 12);
  const std::string base = "step --model fashion-cnn --params " + p + " --batch " + b + " --out ";
  auto one = brigade_run(base + (d / "g1.safetensors").string() + " --devices llvmpipe");
  REQUIRE_MESSAGE(one.status == 0, one.output);
  auto two = brigade_run(base + (d / "g2.safetensors").string() + " --devices llvmpipe,swiftshader -m 4");
  REQUIRE_MESSAGE(two.status == 0, two.output);
  check_no_driver_noise(two, "step");
  CHECK(two.output.find("link 0->1 (llvmpipe -> SwiftShader driver): host, one host allocation imported "
                        "into both devices carried a test pattern both ways") != std::string::npos);
  const io::SafeTensors g1 = io::SafeTensors::load((d / "g1.safetensors").string());
  const io::SafeTensors g2 = io::SafeTensors::load((d / "g2.safetensors").string());
  for (const std::string& name : g1.names()) {
    const std::vector<float> want = g1.f32(name);
    double scale = 1e-3;
    for (float v : want) scale = std::max(scale, double(std::fabs(v)));
    test::check_close(g2.f32(name), want, 2e-5 * scale, 1e-4, name);
  }
  auto forced = brigade_run(base + (d / "g3.safetensors").string() + " --devices llvmpipe,swiftshader --link fd");
  CHECK(forced.status == 2);
  CHECK(forced.output.find("(llvmpipe) and device") != std::string::npos);
  CHECK(forced.output.find("(SwiftShader driver) cannot take this path") != std::string::npos);
  CHECK(!fs::exists(d / "g3.safetensors"));
  fs::remove_all(d);
}

TEST_CASE("a run trained on one device mix resumes on another and ends where one device ends") {
  const fs::path dir = test::scratch_dir("vendors-resume");
  test::write_tiny_fashion(dir / "data", 320, 64);
  const std::string common = "train --model fashion-mlp --data " + (dir / "data").string() +
                             " --steps 6 -b 16 --lr 0.003 --eval-every 3";
  auto a = brigade_run(common + " --devices llvmpipe --out " + (dir / "a").string());
  REQUIRE_MESSAGE(a.status == 0, a.output);
  auto b = brigade_run(common + " --devices llvmpipe,swiftshader -m 2 --stop-after 3 --out " + (dir / "b").string());
  REQUIRE_MESSAGE(b.status == 0, b.output);
  check_no_driver_noise(b, "train");
  b = brigade_run("train --resume --devices swiftshader,llvmpipe,swiftshader -m 4 --out " + (dir / "b").string());
  REQUIRE_MESSAGE(b.status == 0, b.output);
  check_no_driver_noise(b, "train --resume");
  const auto ra = test::records(dir / "a", "train"), rb = test::records(dir / "b", "train");
  REQUIRE(ra.size() == 6);
  REQUIRE(rb.size() == 6);
  for (size_t i = 0; i < ra.size(); ++i)
    CHECK_MESSAGE(std::fabs(ra[i]["loss"].get<double>() - rb[i]["loss"].get<double>()) < 1e-4, "step ", i + 1);
  const auto ea = test::records(dir / "a", "eval"), eb = test::records(dir / "b", "eval");
  REQUIRE(ea.size() == eb.size());
  for (size_t i = 0; i < ea.size(); ++i) {
    CHECK(std::fabs(ea[i]["loss"].get<double>() - eb[i]["loss"].get<double>()) < 1e-4);
    CHECK(ea[i]["accuracy"] == eb[i]["accuracy"]);
  }
  const io::SafeTensors ca = io::SafeTensors::load((dir / "a" / "checkpoint.safetensors").string());
  const io::SafeTensors cb = io::SafeTensors::load((dir / "b" / "checkpoint.safetensors").string());
  for (const std::string& name : ca.names())
    if (name.rfind("optimizer.", 0) != 0) test::check_close(cb.f32(name), ca.f32(name), 1e-5, 1e-3, name);
  fs::remove_all(dir);
}

TEST_CASE("--partition profile gives SwiftShader, the slower driver, fewer layers than lavapipe and than by cost") {
  // gpt-mini: its attention runs about ten times slower on SwiftShader than on lavapipe. (On
  // fashion-cnn's layers the two drivers came within a factor of two once SwiftShader's
  // products took folded constants, and profile and cost gave it the same layers.)
  const std::string base = "plan --model gpt-mini --devices llvmpipe,swiftshader -m 4 -b 16 --partition ";
  const auto cost = brigade_run(base + "cost");
  REQUIRE_MESSAGE(cost.status == 0, cost.output);
  const auto profile = brigade_run(base + "profile");
  REQUIRE_MESSAGE(profile.status == 0, profile.output);
  check_no_driver_noise(profile, "plan --partition profile");
  const auto by_cost = layers_per_device(cost.output), by_profile = layers_per_device(profile.output);
  INFO(cost.output, profile.output);
  REQUIRE(by_cost.size() == 2);
  REQUIRE(by_profile.size() == 2);
  CHECK(by_cost.at("llvmpipe") + by_cost.at("SwiftShader") == 11);
  CHECK(by_profile.at("llvmpipe") + by_profile.at("SwiftShader") == 11);
  CHECK(by_profile.at("SwiftShader") < by_profile.at("llvmpipe"));
  CHECK(by_profile.at("SwiftShader") < by_cost.at("SwiftShader"));
}

}  // namespace vendors_cli_test
