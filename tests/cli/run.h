// Running the real brigade program from the end-to-end tests.
#pragma once

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace brigade::test {

// Every program these tests start runs under the validation layer with synchronization
// validation; the program fails (exit 5) if the layer reports anything.
inline const bool kChildrenValidated = setenv("BRIGADE_VALIDATION", "1", 1) == 0;
inline constexpr const char* kValidationFailure = "validation layer reported";

// And each keeps its caches (the planner's profiles, tuned tilings) in a folder of this test
// process's own, removed as it ends, unless a test gives its own BRIGADE_CACHE_DIR: what a
// user measured on this machine never changes what a test sees.
struct ChildCaches {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("brigade-cli-caches-" + std::to_string(getpid()));
  ChildCaches() { setenv("BRIGADE_CACHE_DIR", dir.c_str(), 1); }
  ~ChildCaches() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};
inline const ChildCaches kChildCaches;

struct Result {
  int status = 0;
  std::string output;  // stdout and stderr
};

// Runs a shell command line that starts brigade (under mpirun, say), with the same checks.
inline Result command_run(const std::string& command) {
  Result r;
  const std::string& args = command;
  const std::string cmd = command + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) r.output.append(buf.data(), n);
  const int status = pclose(p);
  // Killed by a signal (the shell reports 128 + the signal): a crash, or a sanitizer's report,
  // which ends in SIGABRT. No brigade command exits that way by itself unless interrupted, and
  // these runs never are, so it must not pass for the failure a test may expect.
  if (WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) > 128))
    FAIL("brigade " << args << " was killed by a signal:\n" << r.output);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  CHECK_MESSAGE(r.output.find(kValidationFailure) == std::string::npos, "brigade ", args, "\n", r.output);
  return r;
}

inline Result brigade_run(const std::string& args) { return command_run(BRIGADE_EXE " " + args); }

// What `train --precision auto` stores in on device 0, as `brigade devices --json` says.
inline std::string precision_auto() {
  const Result r = brigade_run("devices --json");
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.output)[0]["precision_auto"];
}

// Starts a shell command line in the background, its stdout and stderr into `log`; returns
// its pid.
inline pid_t command_spawn(const std::string& command, const std::filesystem::path& log) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const std::string cmd = command + " > '" + log.string() + "' 2>&1";
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), nullptr);
    _exit(127);
  }
  return pid;
}

// Kills a spawned process that is still running when its test leaves the scope early (a
// failed REQUIRE, a throw), so that a failed case leaves nothing running beside the cases
// after it. A process the test has waited for is no longer its child, and is left alone.
struct KillOnExit {
  pid_t pid;
  explicit KillOnExit(pid_t spawned) : pid(spawned) {}
  KillOnExit(const KillOnExit&) = delete;
  KillOnExit& operator=(const KillOnExit&) = delete;
  ~KillOnExit() {
    if (pid > 0 && waitpid(pid, nullptr, WNOHANG) == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

// How a background process ended: its wait status, and the seconds it took from the call.
struct Exit {
  int status = 0;
  double seconds = 0;
};
// Waits at most `limit` seconds for `pid` to exit, then kills it; nothing when it had to be.
inline std::optional<Exit> wait_exit(pid_t pid, double limit) {
  const auto start = std::chrono::steady_clock::now();
  const auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  int status = 0;
  while (since() < limit) {
    if (waitpid(pid, &status, WNOHANG) == pid) return Exit{status, since()};
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return std::nullopt;
}

// Starts the program in the background, its stdout and stderr into `log`; returns its pid.
inline pid_t brigade_spawn(const std::string& args, const std::filesystem::path& log) {
  return command_spawn(BRIGADE_EXE " " + args, log);
}

// An empty directory of this test process's own.
inline std::filesystem::path scratch_dir(const std::string& name) {
  const std::filesystem::path d =
      std::filesystem::temp_directory_path() / ("brigade-cli-" + name + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The records of one kind in a run folder's metrics.jsonl. A last line without its newline is
// one the run is writing: a test that polls a running run can read the first page of a
// record whose write spans two pages of the file before the second is copied in.
inline std::vector<nlohmann::json> records(const std::filesystem::path& run, const std::string& kind) {
  std::vector<nlohmann::json> out;
  std::ifstream in(run / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line) && !in.eof()) {
    const auto j = nlohmann::json::parse(line);
    if (j.at("kind") == kind) out.push_back(j);
  }
  return out;
}

}  // namespace brigade::test
