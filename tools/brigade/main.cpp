// brigade: GPipe pipeline-parallel training on Vulkan compute.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>

#include "commands.h"
#include "engine_words.h"
#include "ranks.h"
#include "vk/check.h"
#include "vk/instance.h"

namespace {

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
  } catch (const CLI::ParseError& e) {
    return app.exit(e);  // every rank parsed the same arguments
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
  const int status = run(app, argc, argv);
  // Under --validation or BRIGADE_VALIDATION=1, a message from the layer fails the command
  // even when it otherwise succeeded.
  if (const std::size_t n = brigade::vk::validation_messages_reported(); n > 0) {
    std::fprintf(stderr, "brigade: the Vulkan validation layer reported %zu message(s), shown above\n", n);
    if (status == 0) return 5;
  }
  return status;
}
