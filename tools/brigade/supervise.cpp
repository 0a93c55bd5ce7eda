// `brigade supervise -- COMMAND`: runs a training job (`mpirun ... brigade train ...`, or
// `brigade train ...` alone) and, when it fails in a way a restart can fix (a rank killed, a
// host gone, a device lost: exit status 3 or a signal), starts it again on the ranks and hosts
// that remain, re-planned (--plan auto), from the checkpoint the failed job wrote, up to
// --restarts times. OpenMPI 4.1 cannot shrink a job's communicator, so the job is restarted
// whole, as TorchElastic restarts its workers. A job that failed for a reason a restart cannot
// fix (a bad flag, a missing file, no plan in memory: exit status 1, 2, 4 or 5, or stopped by
// SIGINT or SIGTERM) is not restarted, and the supervisor says so in one line. It looks for
// the checkpoint in the job's --out itself: it runs where that folder is (rank 0's host, or a
// path every host shares).
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "commands.h"
#include "io/checkpoint.h"
#include "io/files.h"
#include "pipeline_flags.h"
#include "train.h"
#include "util/error.h"

namespace brigade::cli {
namespace {

struct Exit {
  int code = 0;        // the exit status, 128 + N for a signal
  std::string output;  // the last 64 KiB of stdout and stderr
  bool started = true;  // false: a stop came before the job started
};

// SIGINT or SIGTERM sent to the supervisor: passed on to the job, which saves its work and
// stops (mpirun then exits 1 or 128 + N), and nothing is restarted after it.
volatile sig_atomic_t g_stop = 0;
volatile pid_t g_job = 0;
void on_stop(int sig) {
  g_stop = sig;
  if (g_job > 0) kill(g_job, sig);
}

// Runs `argv`, its stdout and stderr passed through to this process's stdout.
Exit run_job(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe(fds) != 0) throw UserError(std::string("supervise: pipe: ") + std::strerror(errno));
  std::fflush(stdout);
  // SIGINT and SIGTERM held back until the job's id is known, so that one arriving meanwhile
  // is passed on (or, arriving before, no job starts).
  sigset_t stops, before;
  sigemptyset(&stops), sigaddset(&stops, SIGINT), sigaddset(&stops, SIGTERM);
  sigprocmask(SIG_BLOCK, &stops, &before);
  if (g_stop) {
    sigprocmask(SIG_SETMASK, &before, nullptr);
    close(fds[0]), close(fds[1]);
    return Exit{128 + int(g_stop), "", false};
  }
  const pid_t pid = fork();
  if (pid < 0) {
    sigprocmask(SIG_SETMASK, &before, nullptr);
    throw UserError(std::string("supervise: fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    std::signal(SIGINT, SIG_DFL), std::signal(SIGTERM, SIG_DFL);
    sigprocmask(SIG_SETMASK, &before, nullptr);
    dup2(fds[1], STDOUT_FILENO), dup2(fds[1], STDERR_FILENO);
    close(fds[0]), close(fds[1]);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "brigade: error: supervise: cannot start %s: %s\n", args[0], std::strerror(errno));
    _exit(2);
  }
  g_job = pid;
  sigprocmask(SIG_SETMASK, &before, nullptr);
  close(fds[1]);
  Exit e;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    std::fwrite(buf, 1, size_t(n), stdout), std::fflush(stdout);
    e.output.append(buf, size_t(n));
    if (e.output.size() > 65536) e.output.erase(0, e.output.size() - 65536);
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_job = 0;
  e.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return e;
}

size_t find_brigade(const std::vector<std::string>& argv);

// Where the job's parts are in its command line.
struct Job {
  std::vector<std::string> argv;
  size_t brigade = 0;  // the index of the brigade program (its next word is "train")
  bool mpirun() const { return brigade > 0; }
  // The value of `flag` ("--out X" or "--out=X") at or after `from`, or "".
  std::string value(const std::vector<std::string>& flags, size_t from) const {
    for (size_t i = from; i < argv.size(); ++i)
      for (const std::string& f : flags) {
        if (argv[i] == f && i + 1 < argv.size()) return argv[i + 1];
        if (argv[i].rfind(f + "=", 0) == 0) return argv[i].substr(f.size() + 1);
      }
    return "";
  }
  // Sets a flag's value where it first is at or after `from` and before `until` (appended at
  // `until` when absent), and removes its other occurrences; with `to` empty, removes them all.
  void set(const std::vector<std::string>& flags, const std::string& to, size_t from, size_t until) {
    bool placed = to.empty();
    for (size_t i = from; i < std::min(until, argv.size());) {
      size_t words = 0;
      for (const std::string& f : flags)
        if (argv[i] == f && i + 1 < argv.size()) words = 2;
        else if (argv[i].rfind(f + "=", 0) == 0) words = 1;
      if (words == 0) {
        ++i;
      } else if (!placed) {
        (words == 2 ? argv[i + 1] : argv[i]) = words == 2 ? to : flags.front() + "=" + to;
        placed = true, i += words;
      } else {
        argv.erase(argv.begin() + long(i), argv.begin() + long(i + words));
        until -= words;
      }
    }
    if (!placed) argv.insert(argv.begin() + long(std::min(until, argv.size())), {flags.front(), to});
    brigade = find_brigade(argv);
  }
};

// The index of the brigade program followed by "train" in `argv`, or argv.size().
size_t find_brigade(const std::vector<std::string>& argv) {
  for (size_t i = 0; i + 1 < argv.size(); ++i)
    if (std::filesystem::path(argv[i]).filename() == "brigade" && argv[i + 1] == "train") return i;
  return argv.size();
}

Job parse_job(const std::vector<std::string>& argv) {
  Job j{argv, find_brigade(argv)};
  if (j.brigade == argv.size())
    throw UserError("supervise: the command runs no `brigade train` (expected `-- [mpirun ...] brigade train ...`)");
  if (j.value({"--out"}, j.brigade + 2).empty()) throw UserError("supervise: the job's brigade train has no --out");
  return j;
}

// How a rank's end is told: by mpirun ("mpirun noticed that process rank 1 with PID 0 on node
// brigade-b exited on signal 9 (Killed).") or by brigade itself ("brigade: rank 1 of 2
// (brigade-b, stage 1): Vulkan failure: ...").
const std::regex kMpirunSays(R"(process rank (\d+) with PID \d+ on node (\S+) exited on signal)");
const std::regex kBrigadeSays(R"(brigade: rank (\d+) of \d+ \(([^,)]+))");

// The slots of --host entries ("a:2,b": 3).
int host_slots(const std::vector<std::string>& entries) {
  int slots = 0;
  for (const std::string& entry : entries) {
    const size_t colon = entry.find(':');
    slots += colon == std::string::npos ? 1 : std::stoi(entry.substr(colon + 1));
  }
  return slots;
}

// The ranks the failed job ran: its -np, else what a rank said ("brigade: rank 1 of 4"), else
// the slots of its --host, else the last start record of its run (DIR/metrics.jsonl); 0 when
// nothing says.
int job_ranks(const Job& j, const std::string& out, const std::string& dir) {
  if (const std::string np = j.value({"-np", "-n", "--np"}, 0); !np.empty()) return std::stoi(np);
  std::smatch m;
  const std::regex of(R"(brigade: rank \d+ of (\d+) \()");
  if (std::regex_search(out, m, of)) return std::stoi(m[1]);
  const std::string hosts = j.value({"--host", "-H"}, 0);
  int ranks = hosts.empty() ? 0 : host_slots(split_list(hosts));
  if (ranks > 0) return ranks;
  std::ifstream metrics(dir + "/metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const nlohmann::json r = nlohmann::json::parse(line, nullptr, false);
    if (r.is_object() && r.value("kind", "") == "start" && r.contains("ranks") && r["ranks"].is_number_unsigned())
      ranks = r["ranks"].get<int>();
  }
  return ranks;
}

// The addresses `name` resolves to (none where it does not).
std::set<std::string> addresses(const std::string& name) {
  std::set<std::string> out;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(name.c_str(), nullptr, &hints, &found) != 0) return out;
  for (const addrinfo* a = found; a; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* at = a->ai_family == AF_INET ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr)
                                             : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr);
    if ((a->ai_family == AF_INET || a->ai_family == AF_INET6) && inet_ntop(a->ai_family, at, text, sizeof text))
      out.insert(text);
  }
  freeaddrinfo(found);
  return out;
}

// Whether `name` (a host name or an address) is this machine: its name, localhost, a loopback
// address or one its name resolves to.
bool this_machine(const std::string& name, const std::set<std::string>& addrs) {
  char own[256] = {};
  gethostname(own, sizeof own - 1);
  if (name == own || name == "localhost") return true;
  const bool loopback = !addrs.empty() && std::all_of(addrs.begin(), addrs.end(), [](const std::string& a) {
    return a.rfind("127.", 0) == 0 || a == "::1";
  });
  if (loopback) return true;
  for (const std::string& a : addresses(own))
    if (addrs.count(a)) return true;
  return false;
}

// Whether the --host entry's name and the host mpirun or a rank named are one machine.
bool same_host(const std::string& entry, const std::string& host) {
  if (entry == host) return true;
  const std::set<std::string> a = addresses(entry), b = addresses(host);
  if (this_machine(entry, a) && this_machine(host, b)) return true;
  for (const std::string& x : a)
    if (b.count(x)) return true;
  return false;
}

// Data-parallel replicas of `replicas` at most for `ranks` ranks, each a pipeline of at most
// `layers` stages (0: not known): the most ranks at work, the more replicas where two choices
// put as many to work. Returns {replicas, ranks at work}.
std::pair<int, int> fit_replicas(int ranks, int replicas, int layers) {
  std::pair<int, int> best{1, 0};
  for (int r = 1; r <= std::max(1, replicas); ++r) {
    const int stages = layers > 0 ? std::min(ranks / r, layers) : ranks / r;
    if (r * stages >= best.second) best = {r, r * stages};
  }
  return best;
}

// The layers of the job's model (each stage takes one at least): from the checkpoint where
// there is one, else from its --model and --set; 0 when they cannot be read.
int model_layers(const Job& j, const std::string& ckpt) {
  try {
    const size_t train = j.brigade + 2;
    if (std::filesystem::exists(ckpt)) {
      const Settings s = settings_from_json(nlohmann::json::parse(io::checkpoint_config(ckpt), nullptr, false), ckpt);
      return int(model::build_from_toml(s.model_toml, ckpt).layers.size());
    }
    std::vector<std::string> set;
    for (size_t i = train; i + 1 < j.argv.size(); ++i)
      if (j.argv[i] == "--set") set.push_back(j.argv[i + 1]);
      else if (j.argv[i].rfind("--set=", 0) == 0) set.push_back(j.argv[i].substr(6));
    const std::string name = j.value({"--model"}, train);
    return name.empty() ? 0 : int(model::build(name, set).layers.size());
  } catch (const std::exception&) {
    return 0;
  }
}

// After the job failed with `out`: the command line on the ranks and hosts that remain, or ""
// (the reason) when none remains. `ckpt` is the run's checkpoint.
std::string shrink(Job& j, const std::string& out, const std::string& ckpt) {
  if (!j.mpirun()) return "";  // one process: the same command again
  std::smatch m;
  std::string host;
  int lost_rank = -1;
  if (std::regex_search(out, m, kMpirunSays) || std::regex_search(out, m, kBrigadeSays))
    lost_rank = std::stoi(m[1]), host = m[2];
  const size_t train = j.brigade + 2;
  const int ranks = job_ranks(j, out, std::filesystem::path(ckpt).parent_path().string());
  if (ranks < 1) return "how many ranks the job ran is not known (it said none); give mpirun -np N";
  const std::string hosts = j.value({"--host", "-H"}, 0);
  std::vector<std::string> entries = hosts.empty() ? std::vector<std::string>{} : split_list(hosts);
  // The --host entry of the lost rank's host: its name, else one that resolves to it.
  size_t named = entries.size();
  if (!host.empty()) {
    for (size_t pass = 0; pass < 2 && named == entries.size(); ++pass)
      for (size_t i = 0; i < entries.size() && named == entries.size(); ++i) {
        const std::string name = entries[i].substr(0, entries[i].find(':'));
        if (pass == 0 ? name == host : same_host(name, host)) named = i;
      }
  }
  std::string note;
  int left = ranks - 1;  // the lost rank, or one of the ranks of the host that went
  if (named < entries.size() && entries.size() > 1) {
    // The lost host leaves --host, with its slots.
    entries.erase(entries.begin() + long(named));
    j.set({"--host", "-H"}, join_list(entries), 0, j.brigade);
    left = std::min(ranks, host_slots(entries));
  } else if (!host.empty() && !entries.empty() && named == entries.size()) {
    note = " (" + host + " is in no --host entry: one rank fewer on the same hosts)";
  }
  // Where a list gives one entry per rank (--devices, --precision, --mem-limit): on one host
  // rank k opens the entry k and runs stage k, and the lost rank's leaves it; across hosts
  // which entries were the lost host's is mpirun's placement, and such lists are dropped, the
  // re-plan (--plan auto) and the checkpoint's precision deciding instead.
  for (const char* flag : {"--devices", "--precision", "--mem-limit"}) {
    std::vector<std::string> items = split_list(j.value({flag}, train));
    if (items.size() < 2) continue;
    if (entries.size() < 2 && lost_rank >= 0 && items.size() == size_t(ranks) && lost_rank < ranks) {
      items.erase(items.begin() + lost_rank);
      j.set({flag}, join_list(items), train, j.argv.size());
    } else if (items.size() != size_t(left)) {
      j.set({flag}, "", train, j.argv.size());
    }
  }
  // Replicas: the most ranks that can work, each replica a pipeline of ranks / R stages.
  const std::string given = j.value({"--replicas"}, train);
  const int replicas = given.empty() ? 1 : std::stoi(given);
  int working = left;
  if (replicas > 1 && left > 0) {
    const int layers = model_layers(j, ckpt);
    const auto [r, n] = fit_replicas(left, replicas, layers);
    working = n;
    j.set({"--replicas"}, r > 1 ? std::to_string(r) : "", train, j.argv.size());
    if (r != replicas || n < left) {
      const std::string why = left % replicas != 0 ? "--replicas " + given + " does not divide " + std::to_string(left) + " ranks"
                              : "a pipeline takes at most one stage per layer, " + std::to_string(layers) + " here";
      note += r == 1 ? ", one pipeline (" + why + "; --replicas dropped)"
                     : ", --replicas " + std::to_string(r) + " (" + why + ")";
    }
  }
  if (working < 1) return "no rank remains";
  j.set({"-np", "-n", "--np"}, std::to_string(working), 0, j.brigade);
  const std::string lost = lost_rank >= 0 ? "rank " + std::to_string(lost_rank) + " on " + host : "a rank";
  std::printf("supervise: %s lost; restarting on %s%s\n", lost.c_str(),
              (working < left ? std::to_string(working) + " of the " + std::to_string(left) + " rank(s) left"
                              : std::to_string(working) + " rank(s)").c_str(), note.c_str());
  return "";
}

// The cut left to --plan auto (on the ranks that remain a given one no longer fits).
void replan_args(Job& j) {
  const size_t train = j.brigade + 2;
  j.set({"--balance"}, "", train, j.argv.size());
  j.set({"--partition"}, "", train, j.argv.size());
  j.set({"--plan"}, "auto", train, j.argv.size());
}

// The train command that resumes the run from its checkpoint, re-planned for the ranks that
// remain: the settings the checkpoint holds dropped, the cut left to --plan auto, the run's
// precision kept.
void resume_args(Job& j, const std::string& ckpt) {
  const size_t train = j.brigade + 2;
  // The settings the checkpoint holds, but the total a run trains to: the job's own, or the
  // later one it extends a run to (--steps or --epochs with --resume).
  for (const std::string& flag : setting_flags())
    if (flag != "--steps" && flag != "--epochs") j.set({flag}, "", train, j.argv.size());
  j.set({"-b"}, "", train, j.argv.size());
  const bool precision = !j.value({"--precision"}, train).empty();
  for (size_t i = train; i < j.argv.size();)
    if (j.argv[i] == "--resume") j.argv.erase(j.argv.begin() + long(i));
    else ++i;
  replan_args(j);
  j.argv.insert(j.argv.begin() + long(train), "--resume");
  if (!precision) {
    std::string p = trained_precision(
        settings_from_json(nlohmann::json::parse(io::checkpoint_config(ckpt), nullptr, false), ckpt));
    if (p.empty()) p = "fp32";
    if (p.find(',') == std::string::npos) j.set({"--precision"}, p, train, j.argv.size());
  }
}

void run_supervise(const std::vector<std::string>& command, uint32_t restarts) {
  Job j = parse_job(command);
  const auto launch_end = j.argv.begin() + long(j.brigade);
  if (!j.value({"--host", "-H"}, 0).empty() &&
      std::any_of(j.argv.begin(), launch_end, [](const std::string& a) { return a == "-q" || a == "--quiet"; }))
    std::fprintf(stderr, "supervise: warning: mpirun -q does not say which rank a signal killed, so a host whose rank "
                         "is killed stays in --host on a restart (leave out -q)\n");
  const size_t train = j.brigade + 2;
  const std::string ckpt = j.value({"--out"}, train) + "/checkpoint.safetensors";
  // --stop-after N counts from the step the job starts at: a restart stops where it would have.
  uint64_t stop_at = 0;
  if (const std::string n = j.value({"--stop-after"}, train); !n.empty() && n != "0") {
    const bool resumes = std::find(j.argv.begin() + long(train), j.argv.end(), "--resume") != j.argv.end();
    stop_at = (resumes && std::filesystem::exists(ckpt) ? io::checkpoint_step(ckpt) : 0) + std::stoull(n);
  }
  std::signal(SIGINT, on_stop), std::signal(SIGTERM, on_stop);
  for (uint32_t attempt = 0;; ++attempt) {
    const Exit e = run_job(j.argv);
    if (e.code == 0) return;
    if (!e.started)
      throw Interrupted(int(g_stop), "supervise: stopped by signal " + std::to_string(int(g_stop)) +
                                         " before the restart; not restarting");
    if (g_stop)
      throw Interrupted(int(g_stop), "supervise: stopped by signal " + std::to_string(int(g_stop)) +
                                         " (passed on to the job, which exited " + std::to_string(e.code) +
                                         "); not restarting");
    // A device lost (3), a process killed, or a rank that mpirun saw killed whatever status
    // the job then ended with (its peers may fail otherwise once it has gone).
    const bool fixable = e.code == 3 || (e.code > 128 && e.code != 128 + SIGINT && e.code != 128 + SIGTERM) ||
                         std::regex_search(e.output, kMpirunSays);
    // Its ranks stopped by a signal sent to the job (mpirun then exits 1): saved, not failed.
    if (!fixable && e.output.find("brigade: stopped by signal ") != std::string::npos)
      throw JobFailed(e.code, "supervise: the job was stopped by a signal sent to it (exit status " +
                                  std::to_string(e.code) + ") after writing its checkpoint; not restarting (to go "
                                  "on, run it again with train --resume)");
    if (!fixable)
      throw JobFailed(e.code, "supervise: the job failed with exit status " + std::to_string(e.code) +
                                      ", which a restart cannot fix (" +
                                      (e.code == 2 ? "a bad flag or file, or no plan that fits"
                                       : e.code == 1 ? (j.mpirun() ? "mpirun's own failure: see its message above"
                                                                   : "see the message above")
                                       : e.code >= 128 ? "stopped by a signal it was sent"
                                       : e.code >= 100 ? "a flag the parser refused"
                                                       : "an internal failure") +
                                      "); not restarting");
    if (attempt == restarts)
      throw JobFailed(e.code, "supervise: the job failed with exit status " + std::to_string(e.code) + " after " +
                                      std::to_string(restarts) + " restart(s) (--restarts); giving up");
    if (const std::string none = shrink(j, e.output, ckpt); !none.empty())
      throw JobFailed(e.code, "supervise: " + none + "; not restarting");
    // mpirun may return before the ranks MPI_ABORT stopped are gone, and rank 0 holds the run
    // folder's lock until it is: the restart waits for it (a fresh start would not).
    if (const std::string out = j.value({"--out"}, train); std::filesystem::is_directory(out))
      io::FolderLock gone(out, 30.0);
    // No checkpoint yet (a rank lost before the first): the job starts again, re-planned for
    // the ranks that remain.
    if (!std::filesystem::exists(ckpt) && j.mpirun()) replan_args(j);
    if (std::filesystem::exists(ckpt)) {
      resume_args(j, ckpt);
      if (const uint64_t at = io::checkpoint_step(ckpt); stop_at && at >= stop_at) {
        std::printf("supervise: the job's checkpoint is at step %llu, its --stop-after step; not restarting\n",
                    (unsigned long long)at);
        return;
      } else if (stop_at) {
        j.set({"--stop-after"}, std::to_string(stop_at - at), train, j.argv.size());
      }
    }
    std::string line;
    for (const std::string& a : j.argv) line += (line.empty() ? "" : " ") + a;
    std::printf("supervise: restart %u of %u: %s\n", attempt + 1, restarts, line.c_str());
  }
}

}  // namespace

void add_supervise(CLI::App& app) {
  auto command = std::make_shared<std::vector<std::string>>();
  auto restarts = std::make_shared<uint32_t>(3);
  CLI::App* cmd = app.add_subcommand(
      "supervise", "run a training job and restart it on the ranks and hosts that remain when one is lost");
  cmd->add_option("--restarts", *restarts, "restarts at most")->capture_default_str();
  cmd->add_option("command", *command, "the job after --: [mpirun ...] brigade train ...")->required();
  cmd->callback([command, restarts] { run_supervise(*command, *restarts); });
}

}  // namespace brigade::cli
