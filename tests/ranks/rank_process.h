// mpirun as the ranks suite starts it, and the process of one rank of a running job, found by
// its command line and rank.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "run.h"

namespace brigade::test {

// mpirun's own flags: more ranks than cores on a test machine, and as root in a container.
inline std::string mpirun(uint32_t ranks) {
  return "mpirun --oversubscribe" + std::string(geteuid() == 0 ? " --allow-run-as-root" : "") + " -np " +
         std::to_string(ranks) + " ";
}

// The process of rank `rank` whose command line starts with the program and `args`; -1 (and
// a failed check) when there is none.
inline pid_t rank_pid(uint32_t rank, const std::string& args) {
  namespace fs = std::filesystem;
  for (const fs::directory_entry& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = slurp(e.path() / "cmdline"), env = slurp(e.path() / "environ");
    for (char& c : cmdline) c = c ? c : ' ';
    if (cmdline.rfind(BRIGADE_EXE " " + args, 0) != 0) continue;
    if (env.find(std::string("OMPI_COMM_WORLD_RANK=") + std::to_string(rank) + '\0') != std::string::npos)
      return pid_t(std::stoi(name));
  }
  FAIL("no process of rank " << rank << " runs brigade " << args);
  return -1;
}

}  // namespace brigade::test
