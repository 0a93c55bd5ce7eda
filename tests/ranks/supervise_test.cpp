// `brigade supervise` restarting mpirun jobs on one host: how many ranks the restart gets
// (from -np, a hostfile's job, --host naming this machine, --replicas), a job that lost a rank
// before its first checkpoint, and a job stopped by a signal sent to mpirun.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "rank_process.h"
#include "run.h"
#include "tiny_data.h"

namespace ranks_supervise_test {

using namespace brigade;
namespace fs = std::filesystem;

namespace {

// The profile cache the test's own, and mpirun's own flags without -np.
std::string cache(const fs::path& d) { return "env BRIGADE_CACHE_DIR=" + (d / "cache").string() + " "; }
std::string mpirun() {
  return std::string("mpirun --oversubscribe") + (geteuid() == 0 ? " --allow-run-as-root" : "") + " -x BRIGADE_CACHE_DIR ";
}

std::string train_args(const fs::path& d) {
  return std::string(BRIGADE_EXE) + " train --model fashion-mlp --data " + (d / "data").string() +
         " --steps 8 -b 16 --eval-every 4 --eval-batches 1 -m 2";
}

// Supervises `launch` (mpirun's flags after its own) with a fault; the job's run in `out`.
test::Result supervise(const fs::path& d, const std::string& launch, const std::string& fault, const std::string& train_flags,
                       const fs::path& out) {
  return test::command_run(cache(d) + BRIGADE_EXE + " supervise -- " + mpirun() + launch + " -x BRIGADE_FAULT='" + fault + "' " + train_args(d) + " " + train_flags + " --out " +
                           out.string());
}

// The restart line's command.
std::string restart_line(const std::string& output) {
  const size_t at = output.find("supervise: restart 1 of ");
  return at == std::string::npos ? "" : output.substr(at, output.find('\n', at) - at);
}

}  // namespace

TEST_CASE("brigade supervise restarts a --replicas job on every rank that remains, --replicas dropped where it does not divide them") {
  const fs::path d = test::scratch_dir("supervise-replicas");
  test::write_tiny_fashion(d / "data", 320, 64);
  const fs::path out = d / "run";
  const test::Result r = supervise(d, "-np 4", "device-lost:stage 1:backward:13", "--replicas 2 --snapshot-every 1", out);
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("lost; restarting on 3 rank(s), one pipeline (--replicas 2 does not divide 3 ranks; --replicas "
                      "dropped)\n") != std::string::npos);
  const std::string line = restart_line(r.output);
  CHECK(line.find(" -np 3 ") != std::string::npos);
  CHECK(line.find("--replicas") == std::string::npos);
  const auto starts = test::records(out, "start");
  REQUIRE(starts.size() == 2);
  CHECK(starts[1].at("ranks") == 3);
  CHECK(starts[1].at("replicas") == 1);
  CHECK(test::records(out, "end").size() == 1);
  fs::remove_all(d);
}

TEST_CASE("brigade supervise restarts a job without -np, from a hostfile or --host naming this machine, on one rank fewer") {
  const fs::path d = test::scratch_dir("supervise-hosts");
  test::write_tiny_fashion(d / "data", 320, 64);
  std::ofstream(d / "hosts") << "localhost slots=2\n";
  for (const std::string& launch : {"--hostfile " + (d / "hosts").string(), std::string("-np 2 --host localhost:2"),
                                   std::string("-q --host 127.0.0.1:2")}) {
    CAPTURE(launch);
    const fs::path out = d / ("run-" + std::to_string(launch.size()));
    const test::Result r = supervise(d, launch, "device-lost:stage 1:backward:13", "--snapshot-every 1", out);
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(r.output.find("lost; restarting on 1 rank(s)\n") != std::string::npos);
    CHECK(restart_line(r.output).find(" -np 1 ") != std::string::npos);
    // mpirun -q hides which rank a signal killed, and supervise says what that costs.
    CHECK((r.output.find("supervise: warning: mpirun -q does not say which rank") != std::string::npos) ==
          (launch.rfind("-q ", 0) == 0));
    const auto starts = test::records(out, "start");
    CHECK(starts.size() == 2);
    CHECK(starts.back().at("ranks") == 1);
    CHECK(test::records(out, "end").size() == 1);
  }
  fs::remove_all(d);
}

TEST_CASE("a rank lost before the first checkpoint: brigade supervise starts the job again on the ranks that remain, its cut re-planned") {
  const fs::path d = test::scratch_dir("supervise-fresh");
  test::write_tiny_fashion(d / "data", 320, 64);
  const fs::path out = d / "run";
  // Stage 1's first forward: the evaluation before step 1.
  const test::Result r = supervise(d, "-np 2", "device-lost:stage 1:forward:1", "--balance 3,3", out);
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("stopped at step 1, before the first checkpoint (continue with --resume)") != std::string::npos);
  CHECK(r.output.find("lost; restarting on 1 rank(s)\n") != std::string::npos);
  const std::string line = restart_line(r.output);
  CHECK(line.find(" -np 1 ") != std::string::npos);
  CHECK(line.find("--balance") == std::string::npos);
  CHECK(line.find("--plan auto") != std::string::npos);
  CHECK(line.find("--resume") == std::string::npos);
  const auto steps = test::records(out, "train");
  REQUIRE(steps.size() == 8);
  for (size_t i = 0; i < steps.size(); ++i) CHECK(steps[i].at("step") == i + 1);
  CHECK(test::records(out, "start").back().at("ranks") == 1);
  fs::remove_all(d);
}

// Rank 1 in a folder of its own, as on a host without the run folder: it says the checkpoint
// that rank 0's host holds.
TEST_CASE("a rank lost on a host without the run folder names the checkpoint rank 0 wrote") {
  const fs::path d = test::scratch_dir("supervise-wdir");
  test::write_tiny_fashion(d / "data", 320, 64);
  fs::create_directories(d / "a"), fs::create_directories(d / "b");
  const std::string train = " -x BRIGADE_FAULT='device-lost:stage 1:backward:13' " + train_args(d) + " --snapshot-every 1 --out run";
  const test::Result r = test::command_run(cache(d) + mpirun() + "-np 1 -wdir " + (d / "a").string() + train +
                                           " : -np 1 -wdir " + (d / "b").string() + train);
  INFO(r.output);
  CHECK(r.status == 3);
  CHECK(fs::exists(d / "a" / "run" / "checkpoint.safetensors"));
  CHECK(!fs::exists(d / "b" / "run" / "checkpoint.safetensors"));
  CHECK(r.output.find("brigade: rank 1 of 2 (") != std::string::npos);
  CHECK(r.output.find("stopped at step 7, and the last checkpoint (step 6) is untouched") != std::string::npos);
  CHECK(r.output.find("before the first checkpoint") == std::string::npos);
  fs::remove_all(d);
}

TEST_CASE("SIGTERM to mpirun under brigade supervise: the job saves its checkpoint and stops, and the supervisor says so") {
  const fs::path d = test::scratch_dir("supervise-mpirun-signal");
  test::write_tiny_fashion(d / "data", 320, 64);
  const fs::path out = d / "run", log = d / "log";
  const pid_t pid = test::command_spawn(
      cache(d) + BRIGADE_EXE + " supervise -- " + mpirun() + "-np 2 " + BRIGADE_EXE + " train --model fashion-mlp --data " + (d / "data").string() +
          " --steps 1000000 -b 16 --eval-every 1000000 --eval-batches 1 -m 2 --out " + out.string(),
      log);
  const test::KillOnExit reap{pid};
  // The supervisor's child: mpirun, killed with the test where it fails part-way.
  pid_t mpirun = -1;
  for (int i = 0; i < 600 && mpirun < 0; ++i) {
    for (const fs::directory_entry& e : fs::directory_iterator("/proc")) {
      if (e.path().filename().string().find_first_not_of("0123456789") != std::string::npos) continue;
      const std::string stat = test::slurp(e.path() / "stat");
      const size_t close = stat.rfind(')');
      if (close != std::string::npos && stat.find("(mpirun)") != std::string::npos && std::stoi(stat.substr(close + 4)) == pid)
        mpirun = pid_t(std::stoi(e.path().filename().string()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(mpirun > 0);
  struct KillMpirun {
    pid_t pid;
    ~KillMpirun() {
      if (test::slurp(fs::path("/proc") / std::to_string(pid) / "comm").rfind("mpirun", 0) == 0) kill(pid, SIGKILL);
    }
  } const reap_mpirun{mpirun};
  for (int i = 0; i < 600 && test::records(out, "train").size() < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  INFO(test::slurp(log));
  REQUIRE(test::records(out, "train").size() >= 3);
  kill(mpirun, SIGTERM);
  const std::optional<test::Exit> exit = test::wait_exit(pid, 60);
  REQUIRE(exit);
  const std::string said = test::slurp(log);
  INFO(said);
  CHECK(said.find("brigade: stopped by signal 15 after step ") != std::string::npos);
  CHECK(said.find("supervise: the job was stopped by a signal sent to it (exit status ") != std::string::npos);
  CHECK(said.find("after writing its checkpoint; not restarting (to go on, run it again with train --resume)") !=
        std::string::npos);
  CHECK(said.find("does not fit") == std::string::npos);
  CHECK(said.find("supervise: restart") == std::string::npos);
  REQUIRE(WIFEXITED(exit->status));
  CHECK(WEXITSTATUS(exit->status) != 0);
  fs::remove_all(d);
}

}  // namespace ranks_supervise_test
