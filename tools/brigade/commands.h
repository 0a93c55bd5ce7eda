// The brigade program's subcommands. Each adds itself to the CLI11 app and sets the
// callback that runs it.
#pragma once

#include <CLI/CLI.hpp>

#include <stdexcept>
#include <string>

namespace brigade::cli {

void add_devices(CLI::App& app);
void add_bench(CLI::App& app);
void add_init(CLI::App& app);
void add_step(CLI::App& app);
void add_plot(CLI::App& app);
void add_plan(CLI::App& app);
void add_train(CLI::App& app);

// A command stopped by SIGINT or SIGTERM after saving its work; the program exits 128 + signal.
struct Interrupted : std::runtime_error {
  int signal;
  Interrupted(int sig, const std::string& what) : std::runtime_error(what), signal(sig) {}
};

}  // namespace brigade::cli
