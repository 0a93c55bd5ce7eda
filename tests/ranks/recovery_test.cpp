// A device lost under ranks: the job stops (a rank cannot leave it) and `brigade supervise`
// restarts it on the ranks that remain, re-planned, from the last snapshot the job wrote.
// With a snapshot after every step the restart resumes at the last completed step, and what it
// goes on with equals the job switched to the same plan by hand at that step: two ranks to one
// for a loss in each action kind, and three ranks (the third on SwiftShader) to two.
#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <string>

#include "io/safetensors.h"
#include "rank_process.h"
#include "replan.h"
#include "run.h"
#include "tiny_data.h"

namespace ranks_recovery_test {

using namespace brigade;
namespace fs = std::filesystem;

namespace {

// Runs `command` with a profile cache of the test's own and the environment `env`.
test::Result run(const fs::path& d, const std::string& env, const std::string& command) {
  return test::command_run(env + " BRIGADE_CACHE_DIR=" + (d / "cache").string() + " " + command);
}

struct Lost {
  uint64_t step = 0;     // the step the device was lost in
  nlohmann::json flags;  // the plan the restart chose
};

// Supervises `train` on `ranks` ranks, which loses `fault`'s device on the last rank; checks
// what the job and the supervisor said and what the restart resumed from.
Lost supervised_loss(const fs::path& d, const fs::path& out, uint32_t ranks, const std::string& train,
                     const std::string& fault, const std::string& env) {
  const std::string exe = BRIGADE_EXE;
  const test::Result r = run(d, env, exe + " supervise -- " + test::mpirun(ranks) + "-x BRIGADE_FAULT='" + fault + "' " +
                                         exe + " " + train + " --out " + out.string());
  INFO(fault, "\n", r.output);
  REQUIRE(r.status == 0);
  const size_t at = r.output.find("; stopped at step ");
  REQUIRE(at != std::string::npos);
  Lost lost;
  lost.step = std::stoull(r.output.substr(at + 18));
  REQUIRE(lost.step > 1);
  CHECK(r.output.find("VK_ERROR_DEVICE_LOST") != std::string::npos);
  CHECK(r.output.find("supervise: rank " + std::to_string(ranks - 1) + " on ") != std::string::npos);
  CHECK(r.output.find("lost; restarting on " + std::to_string(ranks - 1) + " rank(s)") != std::string::npos);
  // Nothing lost but the step in flight: the restart resumed at the step before it.
  const auto starts = test::records(out, "start");
  REQUIRE(starts.size() == 2);
  CHECK(starts[1].at("step") == lost.step - 1);
  CHECK(starts[1].at("ranks") == ranks - 1);
  const auto steps = test::records(out, "train"), evals = test::records(out, "eval");
  for (size_t i = 0; i < steps.size(); ++i) CHECK(steps[i].at("step") == i + 1);
  for (size_t i = 1; i < evals.size(); ++i) CHECK(evals[i].at("step") > evals[i - 1].at("step"));
  CHECK(test::records(out, "end").size() == 1);
  // The checkpoint's plan history: the restart's plan, from the step lost.
  const auto plans = test::records(out, "plan");
  REQUIRE(!plans.empty());
  lost.flags = plans.back().at("flags");
  const auto config = nlohmann::json::parse(
      io::SafeTensors::load((out / "checkpoint.safetensors").string()).metadata().at("config"));
  REQUIRE(config.at("plan_history").size() == 1);
  CHECK(config.at("plan_history")[0].at("step") == lost.step);
  CHECK(config.at("plan_history")[0].at("flags") == lost.flags);
  return lost;
}

// By hand: `train` on `ranks` ranks stopped after `step`, resumed on one rank fewer with `flags`.
void by_hand(const fs::path& d, const fs::path& out, uint32_t ranks, const std::string& train, uint64_t step,
             const nlohmann::json& flags, const std::string& env) {
  const std::string exe = BRIGADE_EXE;
  test::Result r = run(d, env, test::mpirun(ranks) + exe + " " + train + " --stop-after " + std::to_string(step) +
                                   " --out " + out.string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  r = run(d, env, test::mpirun(ranks - 1) + exe + " train --resume " + test::flags_of(flags) + " --out " + out.string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
}

// The supervised run and the run by hand: the same losses from the step lost, the same
// parameters and optimizer state at the end.
void same_run(const fs::path& lost, const fs::path& hand, uint64_t from) {
  const auto a = test::records(lost, "train"), b = test::records(hand, "train");
  REQUIRE(a.size() == b.size());
  for (size_t i = from - 1; i < a.size(); ++i) CHECK_MESSAGE(a[i].at("loss") == b[i].at("loss"), "step ", i + 1);
  test::same_tensors(lost / "checkpoint.safetensors", hand / "checkpoint.safetensors");
}

}  // namespace

TEST_CASE("a device lost under 2 ranks in a forward, a backward, a step, a send or a capture: the restart on one rank resumes at the last completed step, equal to the switch by hand") {
  const fs::path d = test::scratch_dir("ranks-lost");
  test::write_tiny_fashion(d / "data", 320, 64);
  const std::string train = "train --model fashion-mlp --data " + (d / "data").string() +
                            " --steps 8 -b 16 --eval-every 4 --eval-batches 1 -m 2 --snapshot-every 1";
  std::map<std::string, fs::path> hand;  // by the step lost and the plan: one run by hand each
  for (const std::string kind : {"forward", "backward", "step", "send", "capture"}) {
    CAPTURE(kind);
    const std::string fault = "device-lost:stage 1:" + kind + ":" + (kind == "step" || kind == "capture" ? "5" : "11");
    const fs::path out = d / (kind + "-lost");
    const Lost lost = supervised_loss(d, out, 2, train, fault, "");
    const std::string key = std::to_string(lost.step) + lost.flags.dump();
    if (!hand.count(key)) {
      const fs::path dir = d / ("hand-" + std::to_string(hand.size()));
      by_hand(d, dir, 2, train, lost.step - 1, lost.flags, "");
      hand[key] = dir;
    }
    same_run(out, hand[key], lost.step);
  }
  fs::remove_all(d);
}

TEST_CASE("three ranks, the third on SwiftShader, lose its device: the restart on two lavapipe ranks equals the switch by hand") {
  const fs::path d = test::scratch_dir("ranks-lost-three");
  test::write_tiny_fashion(d / "data", 320, 64);
  const std::string env = std::string("VK_ADD_DRIVER_FILES=") + BRIGADE_DRIVERS_DIR + "/swiftshader/vk_swiftshader_icd.json";
  const std::string train = "train --model fashion-mlp --data " + (d / "data").string() +
                            " --steps 6 -b 16 --eval-every 3 --eval-batches 1 -m 2 --snapshot-every 1";
  const fs::path out = d / "lost", hand = d / "hand";
  const Lost lost = supervised_loss(d, out, 3, train + " --devices llvmpipe,llvmpipe,swiftshader",
                                    "device-lost:stage 2:backward:7", env);
  CHECK(lost.flags.at("devices") == "llvmpipe,llvmpipe");  // the supervisor dropped the lost rank's entry
  by_hand(d, hand, 3, train + " --devices llvmpipe,llvmpipe,swiftshader", lost.step - 1, lost.flags, env);
  same_run(out, hand, lost.step);
  fs::remove_all(d);
}

}  // namespace ranks_recovery_test
