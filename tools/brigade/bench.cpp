// `brigade bench`: the measuring commands, each in a file of its own (bench_*.cpp).
#include "commands.h"

namespace brigade::cli {

void add_bench(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "measure kernel speed, pipeline overhead and GPipe's bubble");
  bench->require_subcommand(1);
  add_bench_kernels(*bench);
  add_bench_pipeline(*bench);
  add_bench_schedules(*bench);
  add_bench_partition(*bench);
  add_bench_profile(*bench);
  add_bench_products(*bench);
  add_bench_attention(*bench);
  add_bench_capacity(*bench);
  add_bench_planner(*bench);
}

}  // namespace brigade::cli
