// The brigade program's subcommands. Each adds itself to the CLI11 app and sets the
// callback that runs it.
#pragma once

#include <CLI/CLI.hpp>

#include <stdexcept>
#include <string>
#include <vector>

namespace brigade::cli {

void add_devices(CLI::App& app);
void add_bench(CLI::App& app);
void add_bench_kernels(CLI::App& bench);   // under `bench`
void add_bench_pipeline(CLI::App& bench);  // under `bench`
void add_bench_schedules(CLI::App& bench);  // under `bench`
void add_bench_partition(CLI::App& bench);  // under `bench`
void add_bench_profile(CLI::App& bench);   // under `bench`
void add_bench_products(CLI::App& bench);  // under `bench`
void add_bench_attention(CLI::App& bench);  // under `bench`
void add_bench_capacity(CLI::App& bench);  // under `bench`
void add_bench_planner(CLI::App& bench);   // under `bench`
void add_init(CLI::App& app);
void add_step(CLI::App& app);
void add_plot(CLI::App& app);
void add_plan(CLI::App& app);
void add_train(CLI::App& app);
void add_eval(CLI::App& app);
void add_sample(CLI::App& app);
void add_supervise(CLI::App& app);

// Writes loss.svg (and accuracy.svg) of runs' metrics into `out` (default: the first run's
// folder), printing one line per file.
void plot_runs(const std::vector<std::string>& runs, const std::vector<std::string>& labels,
               const std::string& out, size_t smooth);

// A command stopped by SIGINT or SIGTERM after saving its work; the program exits 128 + signal.
struct Interrupted : std::runtime_error {
  int signal;
  Interrupted(int sig, const std::string& what) : std::runtime_error(what), signal(sig) {}
};

// A supervised job that ended for good (supervise.cpp): the program says why and exits with
// the job's status.
struct JobFailed : std::runtime_error {
  int code;
  JobFailed(int status, const std::string& what) : std::runtime_error(what), code(status) {}
};

}  // namespace brigade::cli
