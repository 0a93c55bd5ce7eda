// brigade: GPipe pipeline-parallel training on Vulkan compute.
#include <cstdio>
#include <exception>

#include "commands.h"
#include "vk/check.h"

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
  } catch (const brigade::vk::VulkanError& e) {
    std::fprintf(stderr, "brigade: Vulkan failure: %s\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "brigade: internal error: %s\n", e.what());
    return 4;
  }
  return 0;
}
