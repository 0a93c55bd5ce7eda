// brigade: GPipe pipeline-parallel training on Vulkan compute.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <exception>
#include <filesystem>
#include <memory>
#include <new>
#include <string>

#include "commands.h"
#include "engine_words.h"
#include "ranks.h"
#include "vk/check.h"
#include "vk/instance.h"

namespace {

// A whole-number flag's type ("UINT", or "UINT:POSITIVE" once a check names itself).
bool is_type(const CLI::Option* o, const std::string& type) {
  const std::string name = o ? o->get_type_name() : "";
  return name == type || name.starts_with(type + ":");
}

// Every whole-number flag of `app` and its commands takes decimal digits alone: the parser
// reads " -5" as 18446744073709551611, 010 as octal 8, 0x10 as 16, and a number past 2^64 as
// 2^64 - 1. Leading zeros are dropped (010 is 10).
void whole_numbers_only(CLI::App& app) {
  const CLI::Validator whole(
      [](std::string& v) -> std::string {
        if (v.starts_with("-")) return v + " is negative";
        if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos)
          return "'" + v + "' is not a whole number in decimal digits";
        v.erase(0, std::min(v.find_first_not_of('0'), v.size() - 1));
        uint64_t n = 0;
        if (std::from_chars(v.data(), v.data() + v.size(), n).ec != std::errc())
          return v + " is more than " + std::to_string(std::numeric_limits<uint64_t>::max());
        return "";
      },
      "", "decimal digits");
  for (CLI::Option* o : app.get_options())
    if (is_type(o, "UINT")) o->transform(whole);
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) whole_numbers_only(*sub);
}

// The command the arguments name, as deep as they go (brigade bench products), and the first
// word where a command was wanted that names none ("" when every one did).
CLI::App* named_command(CLI::App& app, int argc, char** argv, std::string& unknown) {
  CLI::App* at = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.empty() || word[0] == '-') break;
    const auto subs = at->get_subcommands([&](CLI::App* s) { return s->check_name(word); });
    if (subs.empty()) {
      if (!at->get_subcommands([](CLI::App*) { return true; }).empty()) unknown = word;
      break;
    }
    at = subs.front();
  }
  return at;
}

// A refusal of the parser's in one line, in the program's words: "--steps abc is not a whole
// number, 0 or more", "unknown command 'x' (brigade: devices, plan, ...)".
std::string parse_refusal(CLI::App& app, int argc, char** argv, const CLI::ParseError& e) {
  std::string unknown;
  CLI::App* command = named_command(app, argc, argv, unknown);
  std::string path = command->get_name();
  for (const CLI::App* up = command->get_parent(); up && up->get_parent(); up = up->get_parent())
    path = up->get_name() + " " + path;
  const std::string help = "brigade " + (command == &app ? std::string() : path + " ") + "--help";
  std::string names;
  for (const CLI::App* s : command->get_subcommands([](CLI::App*) { return true; }))
    names += (names.empty() ? "" : ", ") + s->get_name();
  const std::string commands = "(" + (command == &app ? std::string("brigade") : "brigade " + path) + ": " + names + ")";
  if (!unknown.empty()) return "unknown command '" + unknown + "' " + commands;
  std::string what = e.what();
  if (what == "A subcommand is required") return "a command is required " + commands;
  // A flag the command does not know, before what the parser met after it (a required one).
  for (const std::string& extra : command->remaining())
    if (extra.rfind('-', 0) == 0) return "unknown flag " + extra + " (" + help + ")";
  const std::string convert = "Could not convert: ";
  if (what.rfind(convert, 0) == 0) {  // "Could not convert: --steps = abc"
    const size_t eq = what.find(" = ");
    const std::string name = what.substr(convert.size(), eq - convert.size());
    const CLI::Option* o = command->get_option_no_throw(name);
    const std::string value = eq == std::string::npos ? "" : what.substr(eq + 3);
    // Digits alone that did not convert: past what the flag's type holds (2^32 - 1).
    const bool too_large = is_type(o, "UINT") && !value.empty() && value.find_first_not_of("0123456789") == std::string::npos;
    const std::string wanted = is_type(o, "UINT") ? "a whole number, 0 or more" : is_type(o, "INT") ? "a whole number"
                               : is_type(o, "FLOAT") ? "a number" : "";
    if (eq != std::string::npos && too_large) what = name + " " + value + " is more than " + std::to_string(UINT32_MAX);
    else if (eq != std::string::npos && !wanted.empty()) what = name + " " + value + " is not " + wanted;
  }
  return what + " (" + help + ")";
}

// Exit codes: 0 done, 1 a question answered no (plan: does not fit), 2 a user error,
// 3 a Vulkan failure, 4 an internal error, 5 validation messages, 128+N stopped by signal N.
// Under mpirun a message names the rank ("brigade: rank 1 of 2 (host, stage 1): error: ..."),
// and a rank that fails alone stops every rank (MPI_Abort) with its exit code.
int run(CLI::App& app, int argc, char** argv) {
  brigade::mpi::World& world = brigade::cli::world();
  auto fail = [&](int code, const char* kind, const std::string& what) {
    std::fprintf(stderr, "brigade: %s%s%s\n", (world.multi() ? world.who() + ": " : "").c_str(), kind,
                 brigade::cli::in_flags(what).c_str());
    std::fflush(stderr);
    world.abort(code);
    return code;
  };
  try {
    if (world.multi()) {  // the commands that run one pipeline across ranks
      const std::string command = argc > 1 ? argv[1] : "", sub = argc > 2 ? argv[2] : "";
      if (command != "train" && command != "step" && command != "eval" && !(command == "bench" && sub == "planner"))
        throw brigade::cli::EveryRankError("under mpirun brigade runs train, step, eval or bench planner, not '" +
                                           command + "'; start it without mpirun");
      brigade::cli::agree("the program", brigade::cli::file_hash("/proc/self/exe"));
      std::string args;
      for (int i = 1; i < argc; ++i) args += (i > 1 ? " " : "") + std::string(argv[i]);
      brigade::cli::agree("the command line", args);
    }
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::RuntimeError& e) {  // a command's exit status (plan: 1, does not fit)
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    // Every rank parsed the same arguments: rank 0 says it.
    if (world.rank() == 0) std::fprintf(stderr, "brigade: error: %s\n", parse_refusal(app, argc, argv, e).c_str());
    return e.get_exit_code();
  } catch (const brigade::cli::EveryRankError& e) {
    if (world.rank() == 0) std::fprintf(stderr, "brigade: error: %s\n", brigade::cli::in_flags(e.what()).c_str());
    return 2;  // every rank saw it
  } catch (const brigade::cli::JobFailed& e) {
    std::fprintf(stderr, "brigade: error: %s\n", e.what());
    return e.code;
  } catch (const brigade::cli::Interrupted& e) {
    if (world.rank() == 0) std::fprintf(stderr, "brigade: %s\n", e.what());
    return 128 + e.signal;  // every rank stopped at the same step
  } catch (const brigade::UserError& e) {
    // A refusal every rank meets alike (a flag, a missing file) is said once, by rank 0.
    if (world.multi() && world.alike(e.what())) {
      if (world.rank() == 0) std::fprintf(stderr, "brigade: error: %s\n", brigade::cli::in_flags(e.what()).c_str());
      return 2;
    }
    return fail(2, "error: ", e.what());
  } catch (const std::filesystem::filesystem_error& e) {  // --out in a place that cannot be written
    return fail(2, "error: ", std::string(e.path1()) + ": " + e.code().message());
  } catch (const brigade::vk::VulkanError& e) {
    return fail(3, "Vulkan failure: ", e.what());
  } catch (const std::bad_alloc&) {  // the host's memory, not a bug
    return fail(2, "error: ", "out of host memory");
  } catch (const std::exception& e) {
    return fail(4, "internal error: ", e.what());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<brigade::mpi::World> world;
  try {
    world = std::make_unique<brigade::mpi::World>(&argc, &argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "brigade: error: %s\n", e.what());
    return 2;
  }
  brigade::cli::set_world(world.get());
  // One rank speaks for all: the others' standard output is dropped (their errors are not).
  if (world->rank() != 0 && !std::freopen("/dev/null", "w", stdout)) return 4;
  CLI::App app{"brigade: GPipe pipeline-parallel training on Vulkan compute, across GPUs of any vendor"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "brigade 0.1.0");
  brigade::cli::add_devices(app);
  brigade::cli::add_plan(app);
  brigade::cli::add_init(app);
  brigade::cli::add_train(app);
  brigade::cli::add_eval(app);
  brigade::cli::add_sample(app);
  brigade::cli::add_supervise(app);
  brigade::cli::add_step(app);
  brigade::cli::add_plot(app);
  brigade::cli::add_bench(app);
  whole_numbers_only(app);
  const int status = run(app, argc, argv);
  // Under --validation or BRIGADE_VALIDATION=1, a message from the layer fails the command
  // even when it otherwise succeeded.
  if (const std::size_t n = brigade::vk::validation_messages_reported(); n > 0) {
    std::fprintf(stderr, "brigade: the Vulkan validation layer reported %zu message(s), shown above\n", n);
    if (status == 0) return 5;
  }
  return status;
}
