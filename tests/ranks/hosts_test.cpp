// Ranks on two hosts: tools/hosts.sh's brigade-a and brigade-b, network namespaces with their
// own hostnames and /tmp, joined by a veth pair that OpenMPI reaches only over TCP; mpirun
// runs in brigade-a and starts brigade-b's daemon through the script, as it would over ssh.
// The program, its drivers and the inputs are where both hosts see them (as a shared build
// would be); each run's folder is in rank 0's /tmp, whose changes brigade-b does not see. Making the
// namespaces needs root: without it every case here says so and ctest counts it skipped.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <thread>

#include "check.h"
#include "io/safetensors.h"
#include "rank_process.h"
#include "run.h"
#include "tiny_data.h"

namespace ranks_hosts_test {

using namespace brigade;
using test::brigade_run, test::Result;
namespace fs = std::filesystem;

namespace {

// Whether the two hosts are up (made on first use). Not: the case says so in the message
// tests/main.cpp counts as a case not run here, which ctest counts skipped; under
// BRIGADE_REQUIRE_HOSTS=1 (CI, which runs as root and expects them) it fails instead.
// Hosts this process made are removed when it exits.
bool hosts_up() {
  static std::string why;  // when the hosts cannot be made: what tools/hosts.sh said
  static const bool up = [] {
    if (geteuid() != 0) {
      why = "tools/hosts.sh up needs root";
      return false;
    }
    if (test::command_run(std::string(BRIGADE_HOSTS) + " status").status == 0) return true;
    const Result r = test::command_run(std::string(BRIGADE_HOSTS) + " up");
    if (r.status != 0) {
      why = r.output.substr(0, r.output.find('\n'));
      return false;
    }
    std::atexit([] { std::system(BRIGADE_HOSTS " down >/dev/null 2>&1"); });
    return true;
  }();
  if (!up) {
    const char* require = std::getenv("BRIGADE_REQUIRE_HOSTS");
    if (require && std::string(require) == "1") FAIL("BRIGADE_REQUIRE_HOSTS=1, and the two hosts cannot be made: " << why);
    MESSAGE("two hosts unavailable: " << why);
  }
  return up;
}

// A shell command run in `host` (brigade-a or brigade-b).
Result on(const std::string& host, const std::string& command) {
  return test::command_run(std::string(BRIGADE_HOSTS) + " run " + host + " '" + command + "'");
}

// The program on both hosts, one rank each: rank 0 on brigade-a, rank 1 on brigade-b.
std::string across(const std::string& args) {
  return std::string(BRIGADE_HOSTS) + " mpirun -np 2 --host brigade-a,brigade-b " + BRIGADE_EXE + " " + args;
}

// Copies `files` of `dir` on `host` into `to` on this machine, through the command's output:
// a host's writes to /tmp stay in that host, wherever `to` is.
void fetch(const std::string& host, const std::string& dir, const fs::path& to,
           std::initializer_list<const char*> files) {
  fs::create_directories(to);
  for (const char* f : files) {
    const Result r = on(host, "cat " + dir + "/" + f);
    REQUIRE_MESSAGE(r.status == 0, r.output);
    std::ofstream(to / f, std::ios::binary) << r.output;
  }
}

// A folder both hosts see (this machine's, which each host sees under its own changes).
fs::path shared_dir(const std::string& name) {
  const fs::path d = fs::path(BRIGADE_SHARED_SCRATCH) / (name + "-" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string train_args(const fs::path& d, const std::string& out) {
  return "train --model fashion-mlp --data " + (d / "data").string() + " --out " + out +
         " --steps 3 --batch-size 12 --optimizer adamw --lr 0.003 --clip 0.5 --eval-every 3 --eval-batches 1";
}

// The line `brigade eval` and the end of `train` print: "test loss 2.2717, accuracy ...".
std::string eval_line(const std::string& output) {
  const size_t at = output.find("test loss ");
  return at == std::string::npos ? std::string() : output.substr(at, output.find('\n', at) - at);
}

}  // namespace

TEST_CASE("across two hosts over TCP: 2 stages and 2 replicas train as one process, and only rank 0's host has the run") {
  if (!hosts_up()) return;
  const fs::path d = shared_dir("hosts-train");
  test::write_tiny_fashion(d / "data", 48, 24);
  Result r = brigade_run(train_args(d, (d / "one").string()) + " -m 4");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const auto one = test::records(d / "one", "train");
  REQUIRE(one.size() == 3);
  for (const std::string flags : {"-m 4", "-m 2 --replicas 2"}) {
    CAPTURE(flags);
    const std::string run = "/tmp/brigade-hosts-run-" + std::to_string(getpid());
    r = test::command_run(across(train_args(d, run) + " " + flags));
    REQUIRE_MESSAGE(r.status == 0, r.output);
    if (std::string(flags).find("replicas") == std::string::npos)
      CHECK(r.output.find("link 0->1 (rank 0 on brigade-a -> rank 1 on brigade-b): mpi") != std::string::npos);
    // The run folder is on brigade-a only; brigade-b never had one.
    CHECK(on("brigade-a", "test -f " + run + "/checkpoint.safetensors && test -f " + run + "/metrics.jsonl").status == 0);
    CHECK(on("brigade-b", "test ! -e " + run).status == 0);
    CHECK_FALSE(fs::exists(run));  // nor this machine's own /tmp
    const fs::path copy = d / "copy";
    fs::remove_all(copy);
    fetch("brigade-a", run, copy, {"metrics.jsonl", "checkpoint.safetensors"});
    REQUIRE(on("brigade-a", "rm -rf " + run).status == 0);
    const auto got = test::records(copy, "train");
    REQUIRE(got.size() == 3);
    for (size_t i = 0; i < 3; ++i) {
      CHECK(got[i].at("loss").get<double>() == doctest::Approx(one[i].at("loss").get<double>()).epsilon(1e-4));
      CHECK(got[i].at("grad_norm").get<double>() == doctest::Approx(one[i].at("grad_norm").get<double>()).epsilon(1e-4));
    }
    const io::SafeTensors a = io::SafeTensors::load((copy / "checkpoint.safetensors").string()),
                          b = io::SafeTensors::load((d / "one" / "checkpoint.safetensors").string());
    CHECK(a.names() == b.names());
    for (const std::string& name : b.names())
      if (b.info(name).dtype == io::DType::F32) test::check_close(a.f32(name), b.f32(name), 1e-4, 1e-4, name);
  }
  // Evaluation across the hosts: one process's loss and accuracy.
  const Result whole = brigade_run("eval " + (d / "one").string());
  REQUIRE_MESSAGE(whole.status == 0, whole.output);
  r = test::command_run(across("eval " + (d / "one").string() + " -m 2"));
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(!eval_line(whole.output).empty());
  CHECK(eval_line(r.output) == eval_line(whole.output));
  fs::remove_all(d);
}

TEST_CASE("across two hosts: kill -9 of the remote rank stops the job, and its last checkpoint resumes on one host") {
  if (!hosts_up()) return;
  const fs::path d = shared_dir("hosts-kill");
  test::write_tiny_fashion(d / "data", 480, 24);
  const std::string run = "/tmp/brigade-hosts-kill-" + std::to_string(getpid());
  const std::string args = "train --model fashion-mlp --data " + (d / "data").string();
  const pid_t pid = test::command_spawn(across(args + " --steps 400 --batch-size 12 -m 2 --eval-every 5 --eval-batches 1 --out " + run),
                                        d / "log");
  const test::KillOnExit reap{pid};
  // Once a checkpoint has landed on brigade-a, kill brigade-b's rank.
  const auto start = std::chrono::steady_clock::now();
  while (on("brigade-a", "test -f " + run + "/checkpoint.safetensors").status != 0 &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const pid_t remote = test::rank_pid(1, args);
  REQUIRE(remote > 0);
  // It runs in brigade-b's network namespace.
  struct stat ns {};
  REQUIRE(stat("/run/netns/brigade-b", &ns) == 0);
  CHECK(fs::read_symlink(fs::path("/proc") / std::to_string(remote) / "ns" / "net").string() ==
        "net:[" + std::to_string(ns.st_ino) + "]");
  REQUIRE(kill(remote, SIGKILL) == 0);
  const std::optional<test::Exit> exit = test::wait_exit(pid, 20);
  REQUIRE(exit);
  INFO(test::slurp(d / "log"));
  CHECK(exit->seconds < 10);
  CHECK(WIFEXITED(exit->status));
  CHECK(WEXITSTATUS(exit->status) != 0);
  // The checkpoint is whole: one process on brigade-a resumes it.
  const Result r = on("brigade-a", std::string(BRIGADE_EXE) + " train --resume --stop-after 1 --out " + run + " 2>&1; rc=$?; rm -rf " + run + "; exit $rc");
  CHECK_MESSAGE(r.status == 0, r.output);
  fs::remove_all(d);
}

TEST_CASE("brigade supervise: kill -9 of the remote rank restarts the job on brigade-a alone, which finishes the run") {
  if (!hosts_up()) return;
  const fs::path d = shared_dir("hosts-supervise");
  test::write_tiny_fashion(d / "data", 480, 24);
  // The run's folder where both rank 0 on brigade-a writes it and the supervisor, on this
  // machine, sees the checkpoint it restarts from: not under /tmp, which each host overlays.
  const fs::path run = fs::path("/var/tmp") / ("brigade-hosts-supervise-" + std::to_string(getpid()));
  fs::remove_all(run);
  const std::string args = "train --model fashion-mlp --data " + (d / "data").string();
  const pid_t pid = test::command_spawn(std::string(BRIGADE_EXE) + " supervise -- " +
                                            across(args + " --steps 200 --batch-size 12 -m 2 --eval-every 5 --eval-batches 1 --out " +
                                                   run.string()),
                                        d / "log");
  const test::KillOnExit reap{pid};
  const auto start = std::chrono::steady_clock::now();
  while (!fs::exists(run / "checkpoint.safetensors") && std::chrono::steady_clock::now() - start < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(fs::exists(run / "checkpoint.safetensors"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const pid_t remote = test::rank_pid(1, args);
  REQUIRE(remote > 0);
  REQUIRE(kill(remote, SIGKILL) == 0);
  const std::optional<test::Exit> exit = test::wait_exit(pid, 240);
  REQUIRE(exit);
  const std::string log = test::slurp(d / "log");
  INFO(log);
  CHECK(WIFEXITED(exit->status));
  CHECK(WEXITSTATUS(exit->status) == 0);
  CHECK(log.find("supervise: rank 1 on brigade-b lost; restarting on 1 rank(s)") != std::string::npos);
  CHECK(log.find("supervise: restart 1 of 3: ") != std::string::npos);
  CHECK(log.find("-np 1 --host brigade-a ") != std::string::npos);
  CHECK(log.find("train --resume ") != std::string::npos);
  // The restarted job went on from the checkpoint to the end, on one rank.
  const auto end = test::records(run, "end");
  REQUIRE(end.size() == 1);
  CHECK(end[0].at("step") == 200);
  const auto steps = test::records(run, "train");
  REQUIRE(steps.size() == 200);
  for (size_t i = 0; i < steps.size(); ++i) CHECK(steps[i].at("step") == i + 1);
  CHECK(test::records(run, "start").back().at("ranks") == 1);
  fs::remove_all(run);
  fs::remove_all(d);
}

}  // namespace ranks_hosts_test
