// A lost device does not end a run in one process: it re-plans on the devices that remain,
// restores the last snapshot, replays the steps since it and goes on; and what it goes on
// with equals the run switched to the same plan by hand.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "io/safetensors.h"
#include "replan.h"
#include "run.h"
#include "tiny_data.h"

namespace cli_recovery_test {

namespace fs = std::filesystem;
using namespace brigade;
using test::flags_of, test::same_tensors;

namespace {

// Runs brigade with a profile cache of the test's own and, where given, an injected fault.
test::Result run(const fs::path& dir, const std::string& args, const std::string& fault = "",
                 const std::string& env = "") {
  return test::command_run(env + " BRIGADE_CACHE_DIR=" + (dir / "cache").string() +
                           (fault.empty() ? "" : " BRIGADE_FAULT='" + fault + "'") + " " + BRIGADE_EXE + " " + args);
}

// Loses `fault`'s device in a run of `common` + `extra`, then trains by hand what the run went
// on with: the first plan up to the snapshot the run restored, the re-plan's flags from there.
// Both end with the same losses and the same checkpoint. Runs by hand are kept in `done` (by
// the snapshot and the plan) for the next loss that goes on the same way.
void loses_and_equals_by_hand(const fs::path& dir, const std::string& name, const std::string& common,
                              const std::string& extra, const std::string& fault, const std::string& env,
                              std::map<std::string, fs::path>& done) {
  const fs::path lost = dir / (name + "-lost");
  const auto r = run(dir, common + " " + extra + " --out " + lost.string(), fault, env);
  INFO(fault, "\n", r.output);
  REQUIRE(r.status == 0);
  const auto replans = test::records(lost, "replan");
  REQUIRE(replans.size() == 1);
  const nlohmann::json& re = replans[0];
  const uint64_t at = re.at("step"), replayed = re.at("replayed"), snapshot = at - 1 - replayed;
  CHECK(r.output.find("device lost: device ") != std::string::npos);
  // A capture is the host copy after a step, a backward or an optimizer step is in one; a
  // forward or a send may be either (an evaluation after the step runs forwards too).
  const bool in = r.output.find(") in step " + std::to_string(at) + ": ") != std::string::npos;
  const bool after = r.output.find(") after step " + std::to_string(at - 1) + ": ") != std::string::npos;
  if (fault.find(":capture:") != std::string::npos) CHECK(after);
  else if (fault.find(":backward:") != std::string::npos || fault.find(":step:") != std::string::npos) CHECK(in);
  else CHECK(in != after);
  CHECK(r.output.find("going on: plan auto: ") != std::string::npos);
  CHECK(r.output.find(std::to_string(replayed) + " step(s) replayed") != std::string::npos);
  CHECK(re.at("seconds").get<double>() > 0);
  // Every step recorded once, in order: as many as the run's --steps.
  const auto steps = test::records(lost, "train");
  const size_t steps_at = common.find("--steps ");
  REQUIRE(steps_at != std::string::npos);
  REQUIRE(steps.size() == std::stoul(common.substr(steps_at + 8)));
  for (size_t i = 0; i < steps.size(); ++i) CHECK(steps[i].at("step") == i + 1);
  const auto evals = test::records(lost, "eval");
  for (size_t i = 1; i < evals.size(); ++i) CHECK(evals[i].at("step") > evals[i - 1].at("step"));
  // The checkpoint keeps the plan history and the plan the run went on with.
  const auto config = nlohmann::json::parse(io::SafeTensors::load((lost / "checkpoint.safetensors").string()).metadata().at("config"));
  REQUIRE(config.at("plan_history").size() == 1);
  CHECK(config.at("plan_history")[0].at("step") == at);
  CHECK(config.at("plan") == re.at("flags"));

  const std::string key = std::to_string(snapshot) + extra + re.at("flags").dump();
  const bool again = done.count(key) > 0;
  const fs::path hand = again ? done[key] : dir / (name + "-hand");
  done[key] = hand;
  if (snapshot > 0 && !again) {
    const auto first = run(dir, common + " " + extra + " --stop-after " + std::to_string(snapshot) + " --out " + hand.string(), "", env);
    REQUIRE(first.status == 0);
  }
  if (!again) {
    const auto second = run(dir, snapshot > 0 ? "train --resume " + flags_of(re.at("flags")) + " --out " + hand.string()
                                              : common + " " + flags_of(re.at("flags")) + " --out " + hand.string(), "", env);
    INFO(second.output);
    REQUIRE(second.status == 0);
  }
  const auto by_hand = test::records(hand, "train");
  REQUIRE(by_hand.size() == steps.size());
  for (size_t i = snapshot; i < steps.size(); ++i) CHECK_MESSAGE(steps[i].at("loss") == by_hand[i].at("loss"), "step ", i + 1);
  same_tensors(lost / "checkpoint.safetensors", hand / "checkpoint.safetensors");
}

}  // namespace

namespace {

// Two stages lose stage 1's device at the action kinds `kinds` (counted from the stage's
// first, evaluations included: each loss lands in a step; a capture, the snapshot after each
// step and the first before step 1, at the fifth: step 4's, a checkpoint's, whose step is
// redone, not recorded or evaluated twice), and go on as one.
void lose_each(const std::string& name, const std::vector<std::string>& kinds, bool replayed) {
  const fs::path dir = test::scratch_dir(name);
  test::write_tiny_fashion(dir / "data", 320, 64);
  const std::string common = "train --model fashion-mlp --data " + (dir / "data").string() +
                             " --steps 8 -b 16 --eval-every 4 --eval-batches 1";
  std::map<std::string, fs::path> by_hand;
  for (const std::string& kind : kinds) {
    CAPTURE(kind);
    const std::string fault = "device-lost:stage 1:" + kind + ":" + (kind == "step" || kind == "capture" ? "5" : "11");
    loses_and_equals_by_hand(dir, kind, common, "--devices 0,0 -m 2 --snapshot-every 1", fault, "", by_hand);
  }
  // Snapshots every third step: the steps since the last one are replayed on the new plan.
  // And the loss in the copy after the run's last step (its ninth capture): the last step is
  // replayed, and the re-plan recorded, after the loop that ran it.
  if (replayed) {
    loses_and_equals_by_hand(dir, "replay", common, "--devices 0,0 -m 2 --snapshot-every 3",
                             "device-lost:stage 0:backward:13", "", by_hand);
    loses_and_equals_by_hand(dir, "last-copy", common, "--devices 0,0 -m 2 --snapshot-every 1",
                             "device-lost:stage 1:capture:9", "", by_hand);
  }
  fs::remove_all(dir);
}

}  // namespace

TEST_CASE("a device lost in a forward, a backward or an optimizer step: two stages go on as one, equal to the switch by hand") {
  lose_each("recovery-compute", {"forward", "backward", "step"}, false);
}

TEST_CASE("a device lost in a send or a capture, or with steps to replay: two stages go on as one, equal to the switch by hand") {
  lose_each("recovery-two", {"send", "capture"}, true);
}

// Before the first host copy there is none to go back to: a new run rebuilds from its seed's
// initial parameters (stage 1's first forward is in the evaluation before step 1; stage 0's
// first capture the copy before step 1), a resumed one from the checkpoint it read.
TEST_CASE("a device lost in the evaluation or the host copy before step 1 goes on as one stage, equal to the switch by hand") {
  const fs::path dir = test::scratch_dir("recovery-first");
  test::write_tiny_fashion(dir / "data", 320, 64);
  const std::string common = "train --model fashion-mlp --data " + (dir / "data").string() +
                             " --steps 8 -b 16 --eval-every 4 --eval-batches 1";
  std::map<std::string, fs::path> by_hand;
  for (const std::string fault : {"device-lost:stage 1:forward:1", "device-lost:stage 0:capture:1"}) {
    CAPTURE(fault);
    loses_and_equals_by_hand(dir, fault.substr(20, 7), common, "--devices 0,0 -m 2 --snapshot-every 1", fault, "", by_hand);
    CHECK(test::records(dir / (fault.substr(20, 7) + "-lost"), "eval").at(0).at("step") == 0);
  }
  const fs::path resumed = dir / "resumed";
  auto r = run(dir, common + " --devices 0,0 -m 2 --stop-after 4 --out " + resumed.string());
  REQUIRE(r.status == 0);
  r = run(dir, "train --resume --devices 0,0 -m 2 --out " + resumed.string(), "device-lost:stage 0:capture:1");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find(") after step 4: ") != std::string::npos);
  CHECK(r.output.find("going on: plan auto: ") != std::string::npos);
  const auto steps = test::records(resumed, "train");
  REQUIRE(steps.size() == 8);
  for (size_t i = 0; i < steps.size(); ++i) CHECK(steps[i].at("step") == i + 1);
  fs::remove_all(dir);
}

// Under a cap one stage cannot meet, the two lavapipe devices that remain take two stages.
TEST_CASE("three stages on two vendors lose SwiftShader's and go on as two, equal to the switch by hand") {
  const fs::path dir = test::scratch_dir("recovery-three");
  test::write_tiny_fashion(dir / "data", 320, 64);
  const std::string env = std::string("VK_ADD_DRIVER_FILES=") + BRIGADE_DRIVERS_DIR + "/swiftshader/vk_swiftshader_icd.json";
  const std::string common = "train --model fashion-mlp --data " + (dir / "data").string() +
                             " --steps 6 -b 16 --eval-every 3 --eval-batches 1 -m 2";
  std::map<std::string, fs::path> by_hand;
  loses_and_equals_by_hand(dir, "three", common, "--devices llvmpipe,llvmpipe,swiftshader --mem-limit 3584KiB --snapshot-every 2",
                           "device-lost:stage 2:backward:7", env, by_hand);
  const auto replans = test::records(dir / "three-lost", "replan");
  REQUIRE(replans.size() == 1);
  const std::string devices = replans[0].at("flags").at("devices");  // indices of the lavapipe device
  CHECK(std::count(devices.begin(), devices.end(), ',') == 1);
  fs::remove_all(dir);
}

// --plan auto chose one of the three entries it was given (the only one whose cap holds one
// stage); the re-plan after its loss chooses again from the two that remain, each under its
// own cap (not the lost entry's), in two stages.
TEST_CASE("a re-plan after a loss chooses from the devices --plan auto was given, less the entry lost, each under its cap") {
  const fs::path dir = test::scratch_dir("recovery-pool");
  test::write_tiny_fashion(dir / "data", 320, 64);
  const std::string common = "train --model fashion-mlp --data " + (dir / "data").string() +
                             " --steps 6 -b 16 --eval-every 3 --eval-batches 1";
  // (--precision among the pipeline flags: a run by hand from the start takes the re-plan's.)
  const std::string pool = "--plan auto --precision fp32 --devices 0,0,0 --mem-limit 3584KiB,3584KiB,4MiB";
  const auto plan = run(dir, "plan --model fashion-mlp -b 16 " + pool);
  INFO(plan.output);
  REQUIRE(plan.status == 0);
  REQUIRE(plan.output.find("plan auto: devices 0 (llvmpipe)") != std::string::npos);  // one stage: the 4 MiB entry
  std::map<std::string, fs::path> by_hand;
  loses_and_equals_by_hand(dir, "pool", common, pool + " --snapshot-every 2", "device-lost:stage 0:backward:4", "", by_hand);
  const auto replans = test::records(dir / "pool-lost", "replan");
  REQUIRE(replans.size() == 1);
  CHECK(replans[0].at("flags").at("devices") == "0,0");
  CHECK(replans[0].at("flags").at("mem_limit") == "3670016,3670016");
  fs::remove_all(dir);
}

// A given --micro-batches that does not divide the mini-batch stays (split as a given plan
// splits it); an interleaved schedule the devices that remain cannot run (one device, or two
// and 3 micro-batches) goes on as 1f1b.
TEST_CASE("a re-plan after a loss keeps uneven micro-batches and turns an interleaved schedule the rest cannot run into 1f1b") {
  const fs::path dir = test::scratch_dir("recovery-flags");
  test::write_tiny_fashion(dir / "data", 320, 64);
  const std::string data = " --data " + (dir / "data").string();
  std::map<std::string, fs::path> by_hand;
  loses_and_equals_by_hand(dir, "uneven", "train --model fashion-mlp" + data + " -b 8 --steps 6 --eval-every 3 --eval-batches 1",
                           "--devices 0,0 -m 3", "device-lost:stage 1:backward:3", "", by_hand);
  auto replans = test::records(dir / "uneven-lost", "replan");
  REQUIRE(replans.size() == 1);
  CHECK(replans[0].at("flags").at("micro_batches") == 3);
  const std::string common = "train --model fashion-mlp" + data + " -b 12 --steps 6 --eval-every 2 --eval-batches 1";
  for (const std::string devices : {"0,0 -m 2", "0,0,0 -m 3"}) {
    CAPTURE(devices);
    const std::string name = "interleaved-" + std::to_string(devices.size());
    loses_and_equals_by_hand(dir, name, common, "--devices " + devices + " --schedule interleaved --virtual-stages 2",
                             "device-lost:stage 1:backward:8", "", by_hand);
    replans = test::records(dir / (name + "-lost"), "replan");
    REQUIRE(replans.size() == 1);
    CHECK(replans[0].at("flags").at("schedule") == "1f1b");
    CHECK(replans[0].at("flags").at("virtual_stages") == 1);
  }
  fs::remove_all(dir);
}

TEST_CASE("a loss the run cannot go on from stops it with a checkpoint of the last completed step that resumes") {
  const fs::path dir = test::scratch_dir("recovery-stop");
  test::write_tiny_fashion(dir / "data", 320, 64);
  const std::string common = "train --model fashion-mlp --data " + (dir / "data").string() +
                             " --steps 8 -b 16 --eval-every 4 --eval-batches 1 --snapshot-every 1";
  struct Case {
    std::string name, flags, fault, says;
  };
  const Case cases[] = {
      {"last device", "--devices 0", "device-lost:stage 0:backward:7", "no device remains to go on with"},
      {"asked to stop", "--devices 0,0 -m 2 --on-device-loss stop", "device-lost:stage 1:backward:11", "VK_ERROR_DEVICE_LOST"},
      {"second loss while re-planning", "--devices 0,0 -m 2",
       "device-lost:stage 1:backward:11;device-lost:stage 0:1", "another device failed while re-planning"},
      // The ninth capture: the last step's checkpoint, which step 4's gave way to.
      {"lost in the last checkpoint's capture", "--devices 0,0 -m 2 --on-device-loss stop", "device-lost:stage 1:capture:9",
       "VK_ERROR_DEVICE_LOST"},
  };
  for (const Case& c : cases) {
    SUBCASE(c.name.c_str()) {
      const fs::path out = dir / "run";
      const auto r = run(dir, common + " " + c.flags + " --out " + out.string(), c.fault);
      INFO(r.output);
      CHECK(r.status == 3);
      CHECK(r.output.find(c.says) != std::string::npos);
      CHECK(r.output.find("device lost: device ") != std::string::npos);
      // The last completed step is saved (snapshots every step), past the last evaluation's.
      const size_t at = r.output.find("; stopped at step ");
      REQUIRE(at != std::string::npos);
      const uint64_t stopped = std::stoull(r.output.substr(at + 18));
      CHECK(stopped > 5);
      CHECK(r.output.find("checkpoint written at step " + std::to_string(stopped - 1) + ", the last one completed") !=
            std::string::npos);
      const auto ckpt = io::SafeTensors::load((out / "checkpoint.safetensors").string());
      CHECK(ckpt.metadata().at("step") == std::to_string(stopped - 1));
      const auto resumed = run(dir, "train --resume --out " + out.string());
      INFO(resumed.output);
      CHECK(resumed.status == 0);
      CHECK(test::records(out, "train").size() == 8);
      fs::remove_all(out);
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("brigade supervise restarts a job that stopped on a lost device from its checkpoint, and not one a restart cannot fix") {
  const fs::path dir = test::scratch_dir("supervise");
  test::write_tiny_fashion(dir / "data", 320, 64);
  const std::string train = std::string(BRIGADE_EXE) + " train --model fashion-mlp --data " + (dir / "data").string() +
                            " --steps 8 -b 16 --eval-every 4 --eval-batches 1 --on-device-loss stop --snapshot-every 1";
  // The job stops at step 7 with step 6 as its checkpoint (a host copy after every step: left
  // to its measured cadence, a slow build's copy may be two steps apart); the restart resumes
  // there and ends.
  const fs::path out = dir / "run";
  auto r = run(dir, "supervise -- " + train + " --out " + out.string(), "device-lost:stage 0:backward:7");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("checkpoint written at step 6, the last one completed") != std::string::npos);
  CHECK(r.output.find("supervise: a rank lost") == std::string::npos);  // one process: no ranks to drop
  const size_t restart = r.output.find("supervise: restart 1 of 3: ");
  REQUIRE(restart != std::string::npos);
  const std::string line = r.output.substr(restart, r.output.find('\n', restart) - restart);
  CHECK(line.find(" train --resume ") != std::string::npos);
  CHECK(line.find("--model") == std::string::npos);  // the checkpoint holds the settings
  CHECK(line.find(" train --resume --steps 8 ") != std::string::npos);  // but the total the job trains to
  CHECK(line.find("--plan auto") != std::string::npos);
  CHECK(line.find("--precision fp32") != std::string::npos);
  const auto steps = test::records(out, "train");
  REQUIRE(steps.size() == 8);
  for (size_t i = 0; i < steps.size(); ++i) CHECK(steps[i].at("step") == i + 1);
  CHECK(test::records(out, "end").size() == 1);

  // --stop-after counts from where the job started: the restart from step 4's checkpoint
  // trains the 2 steps left of 6, not 6 more.
  const fs::path stopped = dir / "stopped";
  r = run(dir, "supervise -- " + train + " --stop-after 6 --out " + stopped.string(), "device-lost:stage 0:backward:5");
  CHECK(r.status == 0);
  CHECK(r.output.find(" --stop-after 2 ") != std::string::npos);
  CHECK(test::records(stopped, "train").size() == 6);

  // A bad flag: said once by the job, once by the supervisor, never retried.
  r = run(dir, "supervise -- " + std::string(BRIGADE_EXE) + " train --model no-such-model --out " + (dir / "bad").string());
  CHECK(r.status == 2);
  CHECK(r.output.find("supervise: the job failed with exit status 2, which a restart cannot fix") != std::string::npos);
  CHECK(r.output.find("not restarting") != std::string::npos);
  CHECK(r.output.find("supervise: restart") == std::string::npos);
  // What is not a training job.
  r = run(dir, "supervise -- ls");
  CHECK(r.status == 2);
  CHECK(r.output == "brigade: error: supervise: the command runs no `brigade train` (expected `-- [mpirun ...] brigade train ...`)\n");
  fs::remove_all(dir);
}

TEST_CASE("SIGTERM to brigade supervise reaches the job, which saves its checkpoint, and nothing restarts") {
  const fs::path dir = test::scratch_dir("supervise-signal");
  test::write_tiny_fashion(dir / "data", 320, 64);
  const fs::path out = dir / "run", log = dir / "log";
  const pid_t pid = test::brigade_spawn("supervise -- " + std::string(BRIGADE_EXE) + " train --model fashion-mlp --data " +
                                            (dir / "data").string() +
                                            " --steps 100000 -b 16 --eval-every 100000 --eval-batches 1 --out " +
                                            out.string(),
                                        log);
  const test::KillOnExit reap{pid};
  for (int i = 0; i < 600 && test::records(out, "train").size() < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(test::records(out, "train").size() >= 3);
  kill(pid, SIGTERM);  // the supervisor alone, as a service manager stops it
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string said = test::slurp(log);
  INFO(said);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 128 + SIGTERM);
  CHECK(said.find("brigade: stopped by signal 15 after step ") != std::string::npos);
  CHECK(said.find("brigade: supervise: stopped by signal 15 (passed on to the job, which exited 143); not restarting") !=
        std::string::npos);
  CHECK(said.find("supervise: restart") == std::string::npos);
  const auto ckpt = io::SafeTensors::load((out / "checkpoint.safetensors").string());
  CHECK(ckpt.metadata().at("step") == std::to_string(test::records(out, "train").size()));
  fs::remove_all(dir);
}

}  // namespace cli_recovery_test
