// The brigade program's subcommands. Each adds itself to the CLI11 app and sets the
// callback that runs it.
#pragma once

#include <CLI/CLI.hpp>

namespace brigade::cli {

void add_devices(CLI::App& app);
void add_bench(CLI::App& app);
void add_init(CLI::App& app);
void add_step(CLI::App& app);
void add_plot(CLI::App& app);
void add_plan(CLI::App& app);

}  // namespace brigade::cli
