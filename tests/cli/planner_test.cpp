// `--plan auto` end to end: the search's table and choice, the profile cache (reused, a
// corrupt file or another driver's or build's profiles not), constraints nothing satisfies refused in
// one line, and a training run that records its choice and resumes with it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include "io/checkpoint.h"
#include "model/model.h"
#include "run.h"

namespace cli_planner_test {

using namespace brigade;
using test::brigade_run, test::Result;
namespace fs = std::filesystem;

namespace {

// Every run of a case shares the case's own profile cache.
struct Cache {
  fs::path dir;
  explicit Cache(const std::string& name) : dir(test::scratch_dir(name)) {}
  ~Cache() { fs::remove_all(dir); }
  Result run(const std::string& args) const {
    return test::command_run("BRIGADE_CACHE_DIR=" + dir.string() + " " + BRIGADE_EXE + " " + args);
  }
  fs::path file() const { return dir / "profiles.json"; }
};

const char* const kPlan = "plan --model fashion-mlp -b 8 --plan auto --devices 0,0";

// The first of two steps of a fashion-mlp run --plan auto chose, into `out`, stopped there
// with a checkpoint.
Result first_step_planned(const Cache& cache, const fs::path& out) {
  return cache.run("train --model fashion-mlp --plan auto --devices 0,0 --stop-after 1 --out " + out.string() +
                   " --eval-every 1 --eval-batches 1 --batch-size 8 --steps 2");
}

// Rewrites the plan the checkpoint in `out` recorded as `edit` says.
void edit_recorded_plan(const fs::path& out, const std::function<void(nlohmann::json&)>& edit) {
  const std::string path = (out / "checkpoint.safetensors").string();
  nlohmann::json config = nlohmann::json::parse(io::checkpoint_config(path));
  const model::Model m = model::build_from_toml(config.at("model_toml").get<std::string>(), path);
  io::Checkpoint c = io::read_checkpoint(path, m);
  edit(config["plan"]);
  c.config = config.dump();
  io::write_checkpoint(path, m, c);
}

std::string line_with(const std::string& output, const std::string& start) {
  const size_t at = output.find(start);
  return at == std::string::npos ? "" : output.substr(at, output.find('\n', at) - at);
}

}  // namespace

TEST_CASE("plan --plan auto prints its best configurations and choice, then reads the profiles from the cache") {
  const Cache cache("planner-cache");
  const Result cold = cache.run(kPlan);
  REQUIRE_MESSAGE(cold.status == 0, cold.output);
  CHECK(cold.output.find("ms/step") != std::string::npos);
  CHECK(cold.output.find("profiled ") != std::string::npos);
  const std::string choice = line_with(cold.output, "plan auto: devices ");
  CHECK(!choice.empty());
  // The search's bubble is named as simulated (stages sharing cores taking turns), apart from
  // the schedule's own on the plan's last line.
  CHECK(line_with(cold.output, "#").find(" simulated bubble ") != std::string::npos);
  CHECK(choice.find(" ms per step, simulated bubble ") != std::string::npos);
  CHECK(cold.output.find("bubble of ") != std::string::npos);
  REQUIRE(fs::exists(cache.file()));
  const Result warm = cache.run(kPlan);
  REQUIRE_MESSAGE(warm.status == 0, warm.output);
  CHECK(warm.output.find("layer times from the profile cache") != std::string::npos);
  CHECK(warm.output.find("profiling") == std::string::npos);
  CHECK(line_with(warm.output, "plan auto: devices ") == choice);
  // The flags it prints build the same plan by hand.
  const std::string same = line_with(warm.output, "same as: ").substr(9);
  const Result hand = brigade_run("plan --model fashion-mlp -b 8 " + same);
  REQUIRE_MESSAGE(hand.status == 0, hand.output);
  CHECK(hand.output.find("partition by hand") != std::string::npos);
  // Flags given stay fixed.
  const Result fixed = cache.run(std::string(kPlan) + " --micro-batches 2 --schedule 1f1b --precision fp32");
  REQUIRE_MESSAGE(fixed.status == 0, fixed.output);
  CHECK(line_with(fixed.output, "plan auto: devices ").find(", 2 micro-batches, schedule 1f1b, remat ") != std::string::npos);
  CHECK(line_with(fixed.output, "plan auto: devices ").find("precision fp32, ") != std::string::npos);
}

// A setting that chooses other kernels (here the attention form, none of fashion-mlp's layers'
// kernels: the key alone decides) makes its own profile, and leaves the default's in place.
TEST_CASE("profiles measured under another kernel setting in the environment are not used") {
  const Cache cache("planner-settings");
  REQUIRE(cache.run(kPlan).status == 0);
  const Result warm = cache.run(kPlan);
  REQUIRE_MESSAGE(warm.status == 0, warm.output);
  CHECK(warm.output.find("layer times from the profile cache") != std::string::npos);
  const Result other = test::command_run("BRIGADE_ATTENTION=matrix BRIGADE_CACHE_DIR=" + cache.dir.string() + " " +
                                         BRIGADE_EXE + " " + kPlan);
  REQUIRE_MESSAGE(other.status == 0, other.output);
  CHECK(other.output.find("layer times from the profile cache") == std::string::npos);
  CHECK(other.output.find("profiled ") != std::string::npos);
  std::ifstream in(cache.file());
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  REQUIRE(j.is_object());
  size_t under_setting = 0;
  for (const auto& [key, value] : j.at("profiles").items())
    under_setting += key.find(" BRIGADE_ATTENTION=matrix") != std::string::npos;
  CHECK(under_setting > 0);  // one for each profile the default's run made
  CHECK(2 * under_setting == j.at("profiles").size());
  CHECK(cache.run(kPlan).output.find("layer times from the profile cache") != std::string::npos);
}

TEST_CASE("a corrupt profile cache is ignored with one warning and rewritten, and another driver's or build's profiles are not used") {
  const Cache cache("planner-corrupt");
  fs::create_directories(cache.dir);
  std::ofstream(cache.file()) << "{ not json";
  const Result r = cache.run(kPlan);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  size_t warnings = 0;
  for (size_t at = 0; (at = r.output.find("is not a profile cache", at)) != std::string::npos; ++at) ++warnings;
  CHECK(warnings == 1);
  std::ifstream in(cache.file());
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  REQUIRE(j.is_object());
  CHECK(j.at("version") == 1);
  // The same entries under another driver version: profiled again, not read.
  nlohmann::json moved = j;
  moved["profiles"] = nlohmann::json::object();
  for (const auto& [key, value] : j.at("profiles").items()) {
    std::string k = key;
    const size_t first = k.find(' '), second = k.find(' ', first + 1);
    moved["profiles"][k.substr(0, first + 1) + "0.0.0-other" + k.substr(second)] = value;
  }
  std::ofstream(cache.file()) << moved.dump();
  const Result again = cache.run(kPlan);
  REQUIRE_MESSAGE(again.status == 0, again.output);
  CHECK(again.output.find("profiled ") != std::string::npos);
  // The same entries from another build of Brigade (the key's last word): profiled again too,
  // while this build's own are read.
  const Result warm = cache.run(kPlan);
  REQUIRE_MESSAGE(warm.status == 0, warm.output);
  REQUIRE(warm.output.find("layer times from the profile cache") != std::string::npos);
  std::ifstream mine(cache.file());
  const nlohmann::json own = nlohmann::json::parse(mine, nullptr, false);
  REQUIRE(own.is_object());
  const std::string exe = test::slurp(BRIGADE_EXE);
  char build[16];
  std::snprintf(build, sizeof build, "%08lx",
                static_cast<unsigned long>(crc32(0L, reinterpret_cast<const Bytef*>(exe.data()), uInt(exe.size()))));
  nlohmann::json rebuilt = own;
  rebuilt["profiles"] = nlohmann::json::object();
  for (const auto& entry : own.at("profiles").items()) {
    const std::string key = entry.key();
    CHECK_MESSAGE(key.ends_with(std::string(" ") + build), key);
    rebuilt["profiles"][key.substr(0, key.rfind(' ') + 1) + "0badb1d0"] = entry.value();
  }
  std::ofstream(cache.file()) << rebuilt.dump();
  const Result other_build = cache.run(kPlan);
  REQUIRE_MESSAGE(other_build.status == 0, other_build.output);
  CHECK(other_build.output.find("profiled ") != std::string::npos);
}

TEST_CASE("a profile cache that cannot be written is named with its reason, and the plan goes on without claiming it") {
  const Cache cache("planner-unwritable");
  fs::remove_all(cache.dir);
  std::ofstream(cache.dir) << "a file where the cache's folder would be";
  const Result r = cache.run(kPlan);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const std::string warning = line_with(r.output, "brigade: warning: profile cache:");
  CHECK_MESSAGE(warning.find("could not write " + cache.dir.string()) != std::string::npos, r.output);
  CHECK_MESSAGE(warning.find("(Not a directory)") != std::string::npos, r.output);
  CHECK(r.output.find("plan auto: devices") != std::string::npos);
  CHECK(line_with(r.output, "profiled ").find("cached in") == std::string::npos);
  CHECK(fs::is_regular_file(cache.dir));  // nothing left beside it, nothing replaced
}

TEST_CASE("times the cache holds cannot take a plan over a memory cap") {
  const Cache cache("planner-capped");
  REQUIRE(cache.run(kPlan).status == 0);
  // Every time the same: all ties, the configurations that need the most memory's too.
  std::ifstream in(cache.file());
  nlohmann::json j = nlohmann::json::parse(in);
  for (auto& [key, value] : j.at("profiles").items())
    for (const char* pass : {"forward", "backward"})
      for (auto& t : value.at(pass)) t = 1e-6;
  std::ofstream(cache.file()) << j.dump();
  const Result capped = cache.run(std::string(kPlan) + " --mem-limit 4MiB");
  REQUIRE_MESSAGE(capped.status == 0, capped.output);
  CHECK(capped.output.find("layer times from the profile cache") != std::string::npos);
  CHECK(capped.output.find(" NO") == std::string::npos);
  CHECK(capped.output.find("over memory") != std::string::npos);
}

TEST_CASE("cached times that are all zero or sum past a double's range are measured again") {
  const Cache cache("planner-implausible");
  REQUIRE(cache.run(kPlan).status == 0);
  std::ifstream in(cache.file());
  const nlohmann::json measured = nlohmann::json::parse(in);
  for (const double t : {0.0, 1e308}) {
    CAPTURE(t);
    nlohmann::json j = measured;
    for (auto& [key, value] : j.at("profiles").items())
      for (const char* pass : {"forward", "backward"})
        for (auto& x : value.at(pass)) x = t;
    std::ofstream(cache.file()) << j.dump();
    const Result r = cache.run(kPlan);
    REQUIRE_MESSAGE(r.status == 0, r.output);
    CHECK(r.output.find("layer times from the profile cache") == std::string::npos);
    CHECK(r.output.find("profiled ") != std::string::npos);
    CHECK(line_with(r.output, "plan auto: devices ").find("predicted 0.00 ms") == std::string::npos);
  }
}

TEST_CASE("eval --plan auto says the plan it chose for forward passes, before its result") {
  const Cache cache("planner-eval");
  const fs::path params = test::scratch_dir("planner-eval-params");
  REQUIRE(brigade_run("init --model fashion-mlp --seed 0 --out " + (params / "p").string()).status == 0);
  const Result r = cache.run("eval " + (params / "p").string() + " --model fashion-mlp --plan auto --devices 0,0 --limit 1 -b 8");
  fs::remove_all(params);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const std::string line = line_with(r.output, "plan auto: devices");
  CHECK_MESSAGE(line.find("ms per forward pass of a batch") != std::string::npos, r.output);
  CHECK(r.output.find(line) < r.output.find("test loss"));
  // Profiled cold, by forward passes alone.
  std::istringstream lines(r.output);
  size_t profiled = 0;
  for (std::string l; std::getline(lines, l);)
    if (l.find("plan auto: profiling") != std::string::npos) {
      CHECK_MESSAGE(l.find(": forward passes of micro-batches of ") != std::string::npos, l);
      ++profiled;
    }
  CHECK(profiled > 0);
}

// A tiny GPT's 2-byte prompt and 20 bytes run in windows of 8 and then 16 tokens: the 16 is
// planned (profiled in each precision once) and the 8 runs its choice, profiled nowhere.
TEST_CASE("sample --plan auto plans its largest window once, and the smaller windows run that choice") {
  const Cache cache("planner-sample");
  const fs::path params = test::scratch_dir("planner-sample-params") / "p.safetensors";
  const std::string tiny = "--model gpt-mini --set n_layer=1 --set n_head=2 --set n_embd=32 --set block_size=16";
  REQUIRE(brigade_run("init " + tiny + " --out " + params.string()).status == 0);
  const Result r = cache.run("sample " + params.string() + " " + tiny + " --plan auto --prompt QZ --length 20");
  fs::remove_all(params.parent_path());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK_MESSAGE(r.output.find("windows of up to 16 tokens: plan auto: devices") != std::string::npos, r.output);
  CHECK(r.output.find("plan auto: devices") == r.output.rfind("plan auto: devices"));
  std::set<std::string> profiled;
  std::istringstream lines(r.output);
  for (std::string l; std::getline(lines, l);)
    if (l.find("plan auto: profiling") != std::string::npos) CHECK_MESSAGE(profiled.insert(l).second, "twice: ", l);
  CHECK(!profiled.empty());
}

TEST_CASE("--plan auto refuses constraints nothing satisfies in one line") {
  const Cache cache("planner-refusals");
  Result r = cache.run(std::string(kPlan) + " --micro-batches 9");
  CHECK(r.status == 2);
  CHECK(r.output.find("--micro-batches 9 is more than the 8 samples of a mini-batch") != std::string::npos);
  CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  // The refusal names what refused the combination nearest to running, in flags.
  r = cache.run(std::string(kPlan) + " --micro-batches 3 --schedule interleaved --virtual-stages 2");
  CHECK(r.status == 2);
  CHECK(r.output.find("no configuration of fashion-mlp satisfies the flags given") != std::string::npos);
  CHECK(r.output.find("--schedule interleaved runs micro-batches in groups of the 2 stages, and 3 is not a multiple of 2") !=
        std::string::npos);
  CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  r = cache.run(std::string(kPlan) + " --mem-limit 16KiB");
  CHECK(r.status == 2);
  CHECK(r.output.find("no configuration of fashion-mlp fits the devices' memory") != std::string::npos);
  CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  // The closest configuration's cut is the one needing the least memory, said once.
  r = cache.run("plan --model gpt-mini -b 4 --plan auto --devices 0,0,0 --mem-limit 8MiB --schedule 1f1b");
  CHECK(r.status == 2);
  const std::regex closest("the closest: no cut of gpt-mini into 3 stages fits under --mem-limit; in the one needing the "
                           "least memory, stage \\d \\(device 0, [^)]*\\)\\) needs 8\\.\\d MiB, over its 8\\.0 MiB");
  CHECK_MESSAGE(std::regex_search(r.output, closest), r.output);
  CHECK(r.output.find("the closest") == r.output.rfind("the closest"));
  r = cache.run(std::string(kPlan) + " --partition memory");
  CHECK(r.status == 2);
  CHECK(r.output.find("--plan auto cuts by each layer's measured time") != std::string::npos);
}

TEST_CASE("--plan auto refuses 0 micro-batches in the one line a given plan gives") {
  const Cache cache("planner-zero");
  const Result given = cache.run("plan --model fashion-mlp -b 8 -m 0");
  CHECK(given.status == 2);
  CHECK(given.output == "brigade: error: --micro-batches must be at least 1\n");
  for (const std::string& command : {std::string("plan --model fashion-mlp -b 8 --plan auto -m 0"),
                                     "train --model fashion-mlp -b 8 --steps 1 --plan auto -m 0 --out " + (cache.dir / "run").string()}) {
    const Result r = cache.run(command);
    INFO(command);
    CHECK(r.status == 2);
    CHECK(r.output == given.output);
  }
}

TEST_CASE("--plan auto never times a micro-batch no configuration can hold, such as one past the device's binding range") {
  // 50000 of fashion-mlp's 784-float images are 149.5 MiB, over lavapipe's 128 MiB range.
  const Cache cache("planner-binding");
  const Result r = cache.run("plan --model fashion-mlp -b 50000 --plan auto --precision fp32 --devices 0");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("micro-batches of 25000 in fp32") != std::string::npos);
  CHECK(r.output.find("micro-batches of 50000") == std::string::npos);
  CHECK(r.output.find("plan auto: devices 0 (") != std::string::npos);
}

TEST_CASE("--plan auto takes given micro-batches that do not divide the mini-batch, split as a given plan splits them") {
  const Cache cache("planner-uneven");
  const Result r = cache.run(std::string(kPlan) + " --micro-batches 3");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(line_with(r.output, "plan auto: devices ").find(", 3 micro-batches, ") != std::string::npos);
  CHECK(r.output.find("mini-batch 8 as 3 micro-batches of up to 3") != std::string::npos);
}

TEST_CASE("train --plan auto says and records its choice, and --resume goes on with it") {
  const Cache cache("planner-train");
  const fs::path out = cache.dir / "run";
  Result r = first_step_planned(cache, out);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const std::string choice = line_with(r.output, "plan auto: devices ");
  CHECK(!choice.empty());
  const std::vector<nlohmann::json> plans = test::records(out, "plan");
  REQUIRE(plans.size() == 1);
  const nlohmann::json flags = plans[0].at("flags");
  CHECK(plans[0].at("predicted_step_ms").get<double>() > 0);
  // --link says how the plan's boundaries travel, and keeps the plan.
  r = cache.run("train --resume --link auto --out " + out.string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("plan auto, as the run chose at its start") != std::string::npos);
  CHECK(r.output.find(std::to_string(flags.at("micro_batches").get<uint32_t>()) + " micro-batches") != std::string::npos);
  CHECK(r.output.find("profiling") == std::string::npos);  // not searched again
}

TEST_CASE("train --resume plans again where the checkpoint's plan cut the model into other layers") {
  // A checkpoint of an older build, whose GPT blocks were one layer each: its recorded plan's
  // layers add up to another count than this build's model has.
  const Cache cache("planner-layers");
  const fs::path out = cache.dir / "run";
  Result r = first_step_planned(cache, out);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  edit_recorded_plan(out, [](nlohmann::json& plan) { plan["balance"] = "2,3"; });  // five layers; fashion-mlp has six
  r = cache.run("train --resume --out " + out.string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("the checkpoint's plan cuts fashion-mlp into 5 layers, where this build makes 6: planning again "
                      "(--plan auto)") != std::string::npos);
  CHECK(r.output.find("plan auto: devices ") != std::string::npos);  // chosen anew
  CHECK(r.output.find("final test accuracy") != std::string::npos);
}

TEST_CASE("train --resume names the checkpoint's plan where it cannot run here, and --plan auto plans again") {
  const Cache cache("planner-gone");
  const fs::path out = cache.dir / "run";
  Result r = first_step_planned(cache, out);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  // The plan's devices, as on a machine with another device: one this machine lists neither by
  // UUID nor by name, for each of its stages.
  const std::string gone = "0badc0de-0000-4000-8000-000000000009";
  edit_recorded_plan(out, [&](nlohmann::json& plan) {
    for (nlohmann::json& u : plan.at("device_uuids")) u = gone;
    for (nlohmann::json& n : plan.at("device_names")) n = "Gone GPU";
  });
  const std::string path = (out / "checkpoint.safetensors").string();
  r = cache.run("train --resume --out " + out.string());
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find("the plan's device Gone GPU (deviceUUID " + gone +
                      ") is not listed here: no device has its deviceUUID or its name; devices: ") != std::string::npos);
  CHECK(r.output.find("(from the plan " + path + " recorded: pass --plan auto to plan again, or the pipeline flags)") !=
        std::string::npos);
  // Identities that --devices would take (an index, a name's part) are UUIDs here all the same.
  edit_recorded_plan(out, [&](nlohmann::json& plan) {
    for (nlohmann::json& u : plan.at("device_uuids")) u = "0";
  });
  r = cache.run("train --resume --out " + out.string());
  CHECK(r.status == 2);
  CHECK(r.output.find("the plan's device Gone GPU (deviceUUID 0) is not listed here") != std::string::npos);
  // A plan recorded before the UUIDs were kept names its devices by index: device 9 here.
  edit_recorded_plan(out, [](nlohmann::json& plan) {
    std::string devices;
    for (char ch : plan.at("devices").get<std::string>() + ",")
      if (ch == ',') devices += devices.empty() ? "9" : ",9";
    plan["devices"] = devices;
    plan.erase("device_uuids"), plan.erase("device_names");
  });
  r = cache.run("train --resume --out " + out.string());
  CHECK(r.status == 2);
  CHECK(r.output.find("device 9 does not exist") != std::string::npos);
  r = cache.run("train --resume --plan auto --out " + out.string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("plan auto: devices ") != std::string::npos);  // chosen anew
  CHECK(r.output.find("final test accuracy") != std::string::npos);
}

// Devices' indices follow the loader's order, which changes with the drivers it is given: the
// plan keeps its devices' UUIDs, and a resumed run finds them where they are listed now, or
// refuses where they are gone rather than training on whatever took their index.
TEST_CASE("train --resume finds the plan's devices by UUID, wherever the loader lists them now") {
  const Cache cache("planner-uuids");
  const fs::path out = cache.dir / "run";
  Result r = cache.run("train --model fashion-mlp --plan auto --devices llvmpipe --stop-after 1 --out " + out.string() +
                       " --eval-every 1 --eval-batches 1 --batch-size 8 --steps 3");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const std::vector<nlohmann::json> plans = test::records(out, "plan");
  REQUIRE(plans.size() == 1);
  const nlohmann::json flags = plans[0].at("flags");
  INFO(flags.dump());
  CHECK(flags.at("devices") == "0");
  REQUIRE(flags.at("device_uuids").size() == 1);
  CHECK(flags.at("device_uuids")[0].get<std::string>().size() == 36);
  CHECK(flags.at("device_names")[0].get<std::string>().find("llvmpipe") == 0);
  // With SwiftShader's driver given, the loader lists it first: index 0 is SwiftShader's.
  const std::string swiftshader = std::string("VK_ADD_DRIVER_FILES=") + BRIGADE_DRIVERS_DIR +
                                  "/swiftshader/vk_swiftshader_icd.json BRIGADE_CACHE_DIR=" + cache.dir.string() + " " +
                                  BRIGADE_EXE;
  r = test::command_run(swiftshader + " devices");
  const size_t first = r.output.find("\n0 ");
  REQUIRE(first != std::string::npos);
  CHECK(r.output.substr(first + 1, r.output.find('\n', first + 1) - first - 1).find("SwiftShader") != std::string::npos);
  // The plan's device is still lavapipe, found by its UUID at its index now.
  r = test::command_run(swiftshader + " train --resume --stop-after 1 --out " + out.string());
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string line = line_with(r.output, "plan auto, as the run chose at its start (the checkpoint's): devices ");
  CHECK(line.find("devices 1 (llvmpipe)") != std::string::npos);
  CHECK(line.find("SwiftShader") == std::string::npos);
}

// Where several listed devices share the plan's UUID (one driver listed twice) the recorded
// index among them is taken; where none has it but one has the recorded name (lavapipe's UUID
// is its Mesa version's), that one, with a warning.
TEST_CASE("train --resume takes the recorded index among devices of one UUID, and a device of the recorded name") {
  const Cache cache("planner-twins");
  const fs::path out = cache.dir / "run", twin = cache.dir / "twin";
  // lavapipe listed a second time: another driver file for the same library.
  fs::create_directories(twin);
  fs::create_symlink(fs::path(BRIGADE_DRIVERS_DIR) / "lavapipe" / "libvulkan_lvp.so", twin / "libvulkan_lvp.so");
  fs::copy_file(fs::path(BRIGADE_DRIVERS_DIR) / "lavapipe" / "lavapipe_icd.json", twin / "icd.json");
  const std::string twins = "VK_ADD_DRIVER_FILES=" + (twin / "icd.json").string() + " BRIGADE_CACHE_DIR=" +
                            cache.dir.string() + " " + BRIGADE_EXE;
  Result r = test::command_run(twins + " train --model fashion-mlp --plan auto --devices 1 --stop-after 1 --out " +
                               out.string() + " --eval-every 1 --eval-batches 1 --batch-size 8 --steps 4");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const nlohmann::json flags = test::records(out, "plan").at(0).at("flags");
  INFO(flags.dump());
  REQUIRE(flags.at("devices") == "1");
  r = test::command_run(twins + " train --resume --stop-after 1 --out " + out.string());
  CHECK_MESSAGE(r.status == 0, r.output);
  CHECK(line_with(r.output, "plan auto, as the run chose at its start").find("devices 1 (llvmpipe)") != std::string::npos);
  // Another UUID for the same name, as after another Mesa: found by its name, said.
  edit_recorded_plan(out, [](nlohmann::json& plan) { plan["device_uuids"][0] = "6d657361-3939-2e39-2e39-000000000000"; });
  r = test::command_run(twins + " train --resume --stop-after 1 --out " + out.string());
  CHECK_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("brigade: warning: the plan's device llvmpipe") != std::string::npos);
  CHECK(r.output.find("(deviceUUID 6d657361-3939-2e39-2e39-000000000000) is listed under deviceUUID ") != std::string::npos);
  CHECK(r.output.find("(its driver changed?): taken by its name, device 1") != std::string::npos);
}

// A plan resumed where the loader lists its devices elsewhere goes on there, and so does its
// re-plan after a loss: from the devices it ran on, not from the indices it recorded. And a
// resumed run that --plan auto moves to another device of the same index records the move.
TEST_CASE("a resumed plan's re-plan after a loss takes the devices the plan ran on, and a move is in its history") {
  const Cache cache("planner-moved");
  const fs::path out = cache.dir / "run";
  const std::string swiftshader = std::string("VK_ADD_DRIVER_FILES=") + BRIGADE_DRIVERS_DIR +
                                  "/swiftshader/vk_swiftshader_icd.json BRIGADE_CACHE_DIR=" + cache.dir.string() + " ";
  // Two stages of lavapipe (the caps leave one stage too small), stopped after a step.
  Result r = cache.run("train --model fashion-mlp -b 16 --plan auto --devices 0,0 --mem-limit 3584KiB,3584KiB --steps 4 "
                       "--stop-after 1 --eval-batches 1 --out " + out.string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  REQUIRE(test::records(out, "plan").at(0).at("flags").at("devices") == "0,0");
  edit_recorded_plan(out, [](nlohmann::json& plan) { plan["mem_limit"] = "16777216,16777216"; });  // one holds all
  r = test::command_run(swiftshader + "BRIGADE_FAULT='device-lost:stage 1:backward:2' " + BRIGADE_EXE +
                        " train --resume --snapshot-every 1 --out " + out.string());
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(line_with(r.output, "plan auto, as the run chose").find("devices 1,1 (llvmpipe, llvmpipe)") != std::string::npos);
  const std::string going = line_with(r.output, "going on: plan auto: devices ");
  CHECK(going.find("devices 1 (llvmpipe)") != std::string::npos);
  CHECK(going.find("SwiftShader") == std::string::npos);

  // One device's plan, resumed with --plan auto where index 0 is SwiftShader's now.
  const fs::path one = cache.dir / "one";
  r = cache.run("train --model fashion-mlp -b 16 --plan auto --devices 0 -m 1 --precision fp32 --steps 4 --stop-after 1 "
                "--eval-batches 1 --out " + one.string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  r = test::command_run(swiftshader + BRIGADE_EXE + " train --resume --plan auto --devices 0 -m 1 --precision fp32 "
                        "--stop-after 1 --out " + one.string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const nlohmann::json config = nlohmann::json::parse(io::checkpoint_config((one / "checkpoint.safetensors").string()));
  CHECK(config.at("plan_history").size() == 1);
}

}  // namespace cli_planner_test
