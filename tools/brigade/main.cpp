// brigade: GPipe pipeline-parallel training on Vulkan compute.
#include <cstdio>
#include <exception>
#include <filesystem>

#include "commands.h"
#include "vk/check.h"
#include "vk/instance.h"

namespace {

// Exit codes: 0 done, 1 a question answered no (plan: does not fit), 2 a user error,
// 3 a Vulkan failure, 4 an internal error, 5 validation messages, 128+N stopped by signal N.
int run(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const brigade::cli::Interrupted& e) {
    std::fprintf(stderr, "brigade: %s\n", e.what());
    return 128 + e.signal;
  } catch (const brigade::UserError& e) {
    std::fprintf(stderr, "brigade: error: %s\n", e.what());
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {  // --out in a place that cannot be written
    std::fprintf(stderr, "brigade: error: %s: %s\n", e.path1().c_str(), e.code().message().c_str());
    return 2;
  } catch (const brigade::vk::VulkanError& e) {
    std::fprintf(stderr, "brigade: Vulkan failure: %s\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "brigade: internal error: %s\n", e.what());
    return 4;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"brigade: GPipe pipeline-parallel training on Vulkan compute, across GPUs of any vendor"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "brigade 0.1.0");
  brigade::cli::add_devices(app);
  brigade::cli::add_plan(app);
  brigade::cli::add_init(app);
  brigade::cli::add_train(app);
  brigade::cli::add_eval(app);
  brigade::cli::add_sample(app);
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
