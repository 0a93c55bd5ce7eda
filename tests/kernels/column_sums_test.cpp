// Column sums with their rows cut into runs (ops/column_sums.h): each run's workgroups write a
// row of partial sums into the recording's workspace, and a second pass adds the rows to the
// gradient in order. GPUs take runs by default; here they are asked for, so the CPU drivers
// run the GPUs' path. Held to the CPU reference, a folded ReLU's to the two kernels' bits in
// the same runs, and the default choice to what a GPU's LayerNorm and bias gradients need.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "check.h"
#include "gpu.h"
#include "half_check.h"
#include "ops/activation.h"
#include "ops/column_sums.h"
#include "ops/layernorm.h"
#include "ops/linear.h"
#include "ref/layernorm.h"
#include "util/error.h"
#include "vk/commands.h"

namespace kernels_column_sums_test {

using namespace brigade;

namespace {

constexpr double kAtol = 1e-5, kRtol = 1e-5;

// A workspace of garbage: the runs never read what it held.
vk::Buffer workspace(vk::Device& dev, uint32_t seed) {
  return test::to_device(dev, test::random_vector(1u << 16, seed, -1e3f, 1e3f), "workspace");
}

std::string walk_name(ops::ColumnWalk w, uint32_t rows, uint32_t columns) {
  return std::to_string(w.lanes) + " lanes, " + std::to_string(w.runs) + " runs, " + std::to_string(rows) + "x" +
         std::to_string(columns);
}

// LayerNorm's parameter gradients of N rows of C channels (random inputs from `seed` on)
// summed by `walk`, against the CPU reference from the statistics the kernel reads (rounded
// to fp32).
void check_layernorm_weight(vk::Device& dev, vk::Buffer& work, uint32_t N, uint32_t C, ops::ColumnWalk walk, uint32_t seed,
                            const std::string& label) {
  const auto x = test::random_vector(size_t(N) * C, seed, 2.0f, 4.0f), dy = test::random_vector(size_t(N) * C, seed + 1),
             dw0 = test::random_vector(C, seed + 2), db0 = test::random_vector(C, seed + 3);
  const auto xd = test::to_double(x), dyd = test::to_double(dy);
  std::vector<double> mean(N), rstd(N), y(size_t(N) * C), ones(C, 1.0), zeros(C, 0.0);
  ref::layernorm_forward(xd.data(), ones.data(), zeros.data(), y.data(), mean.data(), rstd.data(), N, C);
  auto bx = test::to_device(dev, x, "x"), bdy = test::to_device(dev, dy, "dy"),
       bmean = test::to_device(dev, test::to_float(mean), "mean"),
       brstd = test::to_device(dev, test::to_float(rstd), "rstd"), bdw = test::to_device(dev, dw0, "dweight"),
       bdb = test::to_device(dev, db0, "dbias");
  vk::Commands cmd(dev, label);
  cmd.set_workspace(vk::View(work));
  ops::layernorm_backward_weight(cmd, bdy, bx, bmean, brstd, bdw, bdb, N, C, walk);
  cmd.run();
  const auto meanf = test::to_double(test::to_float(mean)), rstdf = test::to_double(test::to_float(rstd));
  auto dw = test::to_double(dw0), db = test::to_double(db0);
  ref::layernorm_backward_weight(dyd.data(), xd.data(), meanf.data(), rstdf.data(), dw.data(), db.data(), N, C);
  const std::string what = walk_name(walk, N, C);
  test::check_close(test::to_host(bdw), test::to_float(dw), kAtol, kRtol, "dweight, " + what);
  test::check_close(test::to_host(bdb), test::to_float(db), kAtol, kRtol, "dbias, " + what);
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "a bias gradient summed in runs of rows is the column sums, added to what it held") {
  // 7 runs of 5 rows leave runs with no rows; odd column counts take scalar loads, 260 quads.
  vk::Device& dev = device();
  vk::Buffer work = workspace(dev, 1);
  uint32_t seed = 10;
  for (uint32_t lanes : {1u, 64u})
    for (uint32_t runs : {2u, 7u})
      for (uint32_t columns : {7u, 260u})
        for (uint32_t rows : {5u, 1000u}) {
          const auto dy = test::random_vector(rows * columns, ++seed), db0 = test::random_vector(columns, ++seed);
          auto bdy = test::to_device(dev, dy, "dy"), bdb = test::to_device(dev, db0, "dbias");
          vk::Commands cmd(dev, "bias backward in runs");
          cmd.set_workspace(vk::View(work));
          ops::linear_bias_backward(cmd, bdy, bdb, rows, columns, {lanes, runs});
          cmd.run();
          auto db = test::to_double(db0);
          for (uint32_t r = 0; r < rows; ++r)
            for (uint32_t o = 0; o < columns; ++o) db[o] += dy[size_t(r) * columns + o];
          test::check_close(test::to_host(bdb), test::to_float(db), kAtol, kRtol, walk_name({lanes, runs}, rows, columns));
        }
}

TEST_CASE_FIXTURE(test::Gpu, "a folded ReLU's backward in runs of rows equals relu_backward then the bias gradient in the same runs, bit for bit") {
  vk::Device& dev = device();
  vk::Buffer work = workspace(dev, 2);
  uint32_t seed = 100;
  for (uint32_t columns : {7u, 36u})
    for (uint32_t rows : {5u, 130u}) {
      const ops::ColumnWalk walk(3, 4);
      const uint32_t n = rows * columns;
      const auto y = test::random_vector(n, ++seed), dy = test::random_vector(n, ++seed),
                 db0 = test::random_vector(columns, ++seed);
      auto by = test::to_device(dev, y, "y"), bdy = test::to_device(dev, dy, "dy");
      auto want_g = test::zeros(dev, n, "g"), got_g = test::zeros(dev, n, "g, fused");
      auto want_db = test::to_device(dev, db0, "dbias"), got_db = test::to_device(dev, db0, "dbias, fused");
      vk::Commands cmd(dev, "relu and bias backward in runs");
      cmd.set_workspace(vk::View(work));
      ops::relu_backward(cmd, by, bdy, want_g, n);
      ops::linear_bias_backward(cmd, want_g, want_db, rows, columns, walk);
      ops::linear_relu_backward(cmd, by, bdy, got_g, got_db, rows, columns, ops::Precision::Fp32, walk);
      cmd.run();
      const std::string what = walk_name(walk, rows, columns);
      test::check_bits(test::to_host(got_g), test::to_host(want_g), what + ": g");
      test::check_bits(test::to_host(got_db), test::to_host(want_db), what + ": dbias");
    }
}

TEST_CASE_FIXTURE(test::Gpu, "layernorm's parameter gradients summed in runs of rows match the CPU reference") {
  vk::Device& dev = device();
  vk::Buffer work = workspace(dev, 3);
  for (const auto& [N, C] : {std::pair{5u, 37u}, std::pair{300u, 768u}})
    for (uint32_t runs : {3u, 8u}) check_layernorm_weight(dev, work, N, C, {64, runs}, 1, "layernorm backward weight in runs");
}

// A Linear or LayerNorm wider than one dispatch's 65535 workgroups of columns (8 columns a
// workgroup with one lane, 4 with 64, quads with VEC4): the grid is capped and the
// workgroups walk the columns past it, in one run and in two.
TEST_CASE_FIXTURE(test::Gpu, "column sums wider than 65535 workgroups of columns match the CPU reference") {
  vk::Device& dev = device();
  constexpr uint32_t rows = 3;
  for (const auto& [columns, lanes] : {std::pair{524283u, 1u}, std::pair{262147u, 64u}, std::pair{2200000u, 1u}}) {
    const auto y = test::random_vector(size_t(rows) * columns, 1), dy = test::random_vector(size_t(rows) * columns, 2),
               db0 = test::random_vector(columns, 3);
    auto db = test::to_double(db0), relu_db = test::to_double(db0);
    std::vector<float> g(dy.size());
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t o = 0; o < columns; ++o) {
        const size_t i = size_t(r) * columns + o;
        g[i] = y[i] > 0 ? dy[i] : 0.0f;
        db[o] += dy[i];
        relu_db[o] += g[i];
      }
    auto by = test::to_device(dev, y, "y"), bdy = test::to_device(dev, dy, "dy"), bg = test::zeros(dev, dy.size(), "g");
    auto bdb = test::to_device(dev, db0, "dbias"), brelu_db = test::to_device(dev, db0, "dbias, relu");
    vk::Commands cmd(dev, "wide column sums");
    ops::linear_bias_backward(cmd, bdy, bdb, rows, columns, {lanes, 1});
    ops::linear_relu_backward(cmd, by, bdy, bg, brelu_db, rows, columns, ops::Precision::Fp32, {lanes, 1});
    cmd.run();
    const std::string what = walk_name({lanes, 1}, rows, columns);
    test::check_close(test::to_host(bdb), test::to_float(db), kAtol, kRtol, "bias, " + what);
    test::check_close(test::to_host(brelu_db), test::to_float(relu_db), kAtol, kRtol, "relu's bias, " + what);
    test::check_bits(test::to_host(bg), g, "relu's g, " + what);
  }
  // LayerNorm of 524289 channels, in one run and in two.
  const uint32_t N = 2, C = 524289;
  vk::Buffer work = test::zeros(dev, 2 * 2 * (size_t(C) + 64), "workspace");
  for (uint32_t runs : {1u, 2u}) check_layernorm_weight(dev, work, N, C, {1, runs}, 4, "wide layernorm backward weight");
}

TEST_CASE_FIXTURE(test::Gpu, "column sums in runs need a workspace, and a CPU device takes one run by default") {
  vk::Device& dev = device();
  auto dy = test::zeros(dev, 64 * 8, "dy"), db = test::zeros(dev, 8, "dbias");
  vk::Commands bare(dev, "no workspace");
  CHECK_THROWS_AS(ops::linear_bias_backward(bare, dy, db, 64, 8, {1, 2}), InternalError);
  vk::Buffer work = workspace(dev, 4);
  vk::Commands cmd(dev, "workspace");
  cmd.set_workspace(vk::View(work));
  if (dev.info().type == VK_PHYSICAL_DEVICE_TYPE_CPU)
    CHECK(ops::ColumnSums(cmd, 2, 8, 1u << 20, {}, {}, 1).runs() == 1);
  CHECK(ops::ColumnSums(cmd, 2, 8, 64, {1, 5}, {}, 1).runs() == 5);
}

TEST_CASE("a GPU's column sums take runs for about 1024 workgroups, each lane walking 16 rows or more") {
  // gpt2-small's LayerNorm (768 channels: 48 workgroups of 4 quads) and c_fc bias (3072: 192)
  // over 16 windows of 1024 tokens.
  CHECK(ops::gpu_column_runs(48, 16384, 64) == 16);     // rows bound it
  CHECK(ops::gpu_column_runs(192, 16384, 64) == 6);
  CHECK(ops::gpu_column_runs(96, 4096, 64) == 4);      // rows bound it
  CHECK(ops::gpu_column_runs(1024, 16384, 64) == 1);   // workgroups bound it
  CHECK(ops::gpu_column_runs(2048, 16384, 64) == 1);   // enough workgroups already
  CHECK(ops::gpu_column_runs(48, 100, 64) == 1);       // too few rows to cut
  CHECK(ops::gpu_column_runs(1, 1u << 24, 64) == 64);  // at most 64
}

}  // namespace kernels_column_sums_test
