// Faults a long training run must survive with nothing lost: a step gone non-finite, and
// the process killed outright while it writes a checkpoint.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <filesystem>
#include <optional>
#include <string>

#include "io/safetensors.h"
#include "run.h"
#include "tiny_data.h"

namespace cli_faults_test {

using namespace brigade;
namespace fs = std::filesystem;

TEST_CASE("a step gone non-finite stops training naming step, stage and layer, and leaves the checkpoint untouched") {
  const fs::path dir = test::scratch_dir("non-finite");
  test::write_tiny_fashion(dir / "data", 320, 64);
  const std::string run = (dir / "run").string();
  // SGD at a learning rate of 1e12: the first step is finite, the second is not.
  const std::string args = "train --model fashion-mlp --data " + (dir / "data").string() +
                           " --optimizer sgd --lr 1e12 --steps 6 -b 16 --eval-every 1 --eval-batches 1 "
                           "--devices 0,0 -m 2 --out " + run;
  const auto first = test::brigade_run(args + " --stop-after 1");
  INFO(first.output);
  REQUIRE(first.status == 0);
  const std::string before = test::slurp(dir / "run" / "checkpoint.safetensors");
  const auto r = test::brigade_run("train --resume --out " + run);
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(std::count(r.output.begin(), r.output.end(), '\n') <= 5);
  for (const char* part : {"error: step 2: ", "(layer ", "on stage ", "(device ", "no parameter was updated",
                           "the last checkpoint (step 1) is untouched"})
    CHECK_MESSAGE(r.output.find(part) != std::string::npos, "missing: ", part);
  CHECK(test::slurp(dir / "run" / "checkpoint.safetensors") == before);
  CHECK(test::records(run, "train").size() == 1);
  fs::remove_all(dir);
}

namespace {

// Blocks until `dir` sees a checkpoint being written (a file named checkpoint* created or
// modified), or the timeout passes; returns whether it did.
bool wait_for_checkpoint_write(int inotify, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  alignas(inotify_event) char buf[4096];
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{inotify, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = read(inotify, buf, sizeof buf);
    for (ssize_t at = 0; at < n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(buf + at);
      if (e->len > 0 && std::string(e->name).rfind("checkpoint", 0) == 0) return true;
      at += ssize_t(sizeof(inotify_event) + e->len);
    }
  }
  return false;
}

}  // namespace

TEST_CASE("kill -9 during a checkpoint write leaves the previous checkpoint intact, and the run resumes") {
  const fs::path dir = test::scratch_dir("kill9");
  std::string text;
  for (int i = 0; i < 400; ++i) text += "pack my box with five dozen liquor jugs. ";
  test::write_text(dir / "text.txt", text);
  const fs::path run = dir / "run";
  fs::create_directories(run);
  // A checkpoint after every step, of a model large enough (about 6 MB with AdamW's state)
  // that writing and syncing it takes a while.
  const std::string args = "train --model gpt-mini --set n_layer=2 --set n_head=2 --set n_embd=128 "
                           "--set block_size=16 --data " + (dir / "text.txt").string() +
                           " --steps 1000 -b 2 --eval-every 1 --eval-batches 1 --out " + run.string();
  int caught = 0, attempt = 0;
  for (; attempt < 12 && caught < 2; ++attempt) {
    const int inotify = inotify_init1(IN_CLOEXEC);
    REQUIRE(inotify >= 0);
    REQUIRE(inotify_add_watch(inotify, run.c_str(), IN_CREATE | IN_MODIFY) >= 0);
    const bool resume = fs::exists(run / "checkpoint.safetensors");
    const pid_t pid = test::brigade_spawn(resume ? "train --resume --out " + run.string() : args,
                                          dir / ("log" + std::to_string(attempt)));
    const test::KillOnExit reap{pid};
    // Let a first checkpoint land, then kill the process while it writes a later one.
    bool seen = wait_for_checkpoint_write(inotify, std::chrono::seconds(60));
    if (seen) {  // drain events until a checkpoint is in place, and a little longer
      const auto start = std::chrono::steady_clock::now();
      const auto settle = std::chrono::milliseconds(100 * (attempt % 4));
      while ((!fs::exists(run / "checkpoint.safetensors") || std::chrono::steady_clock::now() < start + settle) &&
             std::chrono::steady_clock::now() < start + std::chrono::seconds(60))
        wait_for_checkpoint_write(inotify, std::chrono::milliseconds(5));
      seen = wait_for_checkpoint_write(inotify, std::chrono::seconds(60));
    }
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    close(inotify);
    INFO("attempt ", attempt, ": ", test::slurp(dir / ("log" + std::to_string(attempt))));
    REQUIRE(seen);
    CHECK(WIFSIGNALED(status));
    // Whatever moment the kill hit, the checkpoint is whole and consistent with metrics.jsonl.
    REQUIRE(fs::exists(run / "checkpoint.safetensors"));
    const auto ckpt = io::SafeTensors::load((run / "checkpoint.safetensors").string());
    CHECK(std::stoull(ckpt.metadata().at("step")) >= 1);
    if (fs::exists(run / "checkpoint.safetensors.tmp")) ++caught;  // killed in the middle of a write
  }
  INFO("caught ", caught, " kills in the middle of a checkpoint write in ", attempt, " attempts");
  CHECK(caught >= 1);
  // The run goes on from the checkpoint that survived.
  const auto before = test::records(run, "train").size();
  const auto resumed = test::brigade_run("train --resume --stop-after 2 --out " + run.string());
  INFO(resumed.output);
  CHECK(resumed.status == 0);
  CHECK_FALSE(fs::exists(run / "checkpoint.safetensors.tmp"));
  CHECK(test::records(run, "train").size() >= before);
  fs::remove_all(dir);
}

// Two runs writing one folder would leave one's records beside the other's checkpoint: while
// a run trains there, a second run is refused at once, a resume after waiting 10 s for it,
// touching nothing.
TEST_CASE("a second train into a run folder another run is writing is refused, and the first goes on") {
  const fs::path dir = test::scratch_dir("folder-lock");
  test::write_tiny_fashion(dir / "data", 320, 64);
  const fs::path run = dir / "run";
  const std::string args = "train --model fashion-mlp --data " + (dir / "data").string() + " -b 16 --eval-batches 1 ";
  const pid_t pid = test::brigade_spawn(args + "--steps 100000 --eval-every 100000 --out " + run.string(), dir / "log");
  const test::KillOnExit reap{pid};
  const auto start = std::chrono::steady_clock::now();
  while (test::records(run, "train").empty() && std::chrono::steady_clock::now() < start + std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE_FALSE(test::records(run, "train").empty());
  const std::string before = test::slurp(run / "checkpoint.safetensors");
  for (const std::string& second : {args + "--steps 5 --seed 2 --out " + run.string(), "train --resume --out " + run.string()}) {
    const auto r = test::brigade_run(second);
    INFO(second, "\n", r.output);
    CHECK(r.status == 2);
    CHECK(r.output.find("brigade: error: " + run.string() + ": another process is writing this folder") != std::string::npos);
  }
  CHECK(test::slurp(run / "checkpoint.safetensors") == before);
  kill(pid, SIGINT);  // the first saves and stops as it would
  const std::optional<test::Exit> e = test::wait_exit(pid, 60);
  REQUIRE(e);
  INFO(test::slurp(dir / "log"));
  CHECK(test::slurp(dir / "log").find("stopped by signal 2 after step") != std::string::npos);
  const auto resumed = test::brigade_run("train --resume --stop-after 1 --out " + run.string());
  CHECK(resumed.status == 0);  // the lock went with the process
  fs::remove_all(dir);
}

TEST_CASE("--on-device-loss stop: a lost device stops every stage with a message naming device and stage, and nothing hangs") {
  const fs::path dir = test::scratch_dir("device-lost");
  test::write_tiny_fashion(dir / "data", 320, 64);
  // Submissions of one stage's device numbered from its first: while the executor is built,
  // in a step's forward or backward, in an optimizer step and around an evaluation.
  for (const std::string stage : {"stage 0", "stage 1"})
    for (int n : {1, 9, 20, 41}) {
      const fs::path run = dir / (stage.substr(6) + "-" + std::to_string(n));
      setenv("BRIGADE_FAULT", ("device-lost:" + stage + ":" + std::to_string(n)).c_str(), 1);
      const pid_t pid = test::brigade_spawn("train --model fashion-mlp --data " + (dir / "data").string() +
                                                " --steps 20 -b 16 --eval-every 5 --eval-batches 1 --devices 0,0 -m 2 --on-device-loss stop --out " +
                                                run.string(),
                                            run.string() + ".log");
      const test::KillOnExit reap{pid};
      unsetenv("BRIGADE_FAULT");
      int status = 0;
      bool exited = false;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
      while (!(exited = waitpid(pid, &status, WNOHANG) == pid) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (!exited) kill(pid, SIGKILL), waitpid(pid, &status, 0);
      const std::string log = test::slurp(run.string() + ".log");
      INFO(stage, " submission ", n, ":\n", log);
      REQUIRE_MESSAGE(exited, "still running after 120 s: a thread hangs");
      REQUIRE(WIFEXITED(status));
      CHECK(WEXITSTATUS(status) == 3);
      CHECK(log.find("(" + stage + ", ") != std::string::npos);
      CHECK(log.find("VK_ERROR_DEVICE_LOST") != std::string::npos);
      CHECK(log.find(test::kValidationFailure) == std::string::npos);
      if (fs::exists(run / "checkpoint.safetensors"))  // what was saved is whole
        CHECK_NOTHROW(io::SafeTensors::load((run / "checkpoint.safetensors").string()));
    }
  fs::remove_all(dir);
}

}  // namespace cli_faults_test
