// Running the real brigade program from the end-to-end tests.
#pragma once

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

namespace brigade::test {

struct Result {
  int status = 0;
  std::string output;  // stdout and stderr
};

inline Result brigade_run(const std::string& args) {
  Result r;
  const std::string cmd = std::string(BRIGADE_EXE) + " " + args + " 2>&1";
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
  return r;
}

// An empty directory of this test process's own.
inline std::filesystem::path scratch_dir(const std::string& name) {
  const std::filesystem::path d =
      std::filesystem::temp_directory_path() / ("brigade-cli-" + name + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace brigade::test
