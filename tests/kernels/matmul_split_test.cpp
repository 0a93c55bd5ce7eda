// A product's K split into parts (ops/matmul_split.h): each part summed by the staged kernels
// into the recording's workspace, the parts then added to C in order. Held to the CPU
// reference (a sum in another order than the unsplit kernel's, so not to its bits), to its own
// bits from run to run, and the choice of parts to what a GPU's weight gradients need.
#include <doctest/doctest.h>

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "check.h"
#include "gpu.h"
#include "half_check.h"
#include "ops/matmul.h"
#include "ops/matmul_split.h"
#include "ops/matmul_tiles.h"
#include "ref/matmul.h"
#include "util/error.h"
#include "vk/commands.h"
#include "vk/spirv.h"

namespace kernels_matmul_split_test {

using namespace brigade;
using ops::MatmulParams;
using ops::MatmulTiling;
using ops::Precision;

namespace {

const MatmulTiling kShared{MatmulTiling::Variant::Shared, 16, 16, 4, 4, 16, 0};

MatmulTiling parts_of(MatmulTiling t, uint32_t parts) {
  t.k_parts = parts;
  return t;
}

// C (+)= alpha op(A) op(B) of p on random A and B (rounded to `values`, stored as p's formats
// say) with the recording's workspace `workspace_floats`; returns C, checked against the
// reference on the same values.
std::vector<float> check_split(vk::Device& dev, const MatmulParams& p, Precision values, uint32_t seed,
                               uint64_t workspace_floats) {
  const auto a = test::rounded(test::random_vector(uint64_t(p.M) * p.K, seed), values);
  const auto b = test::rounded(test::random_vector(uint64_t(p.K) * p.N, seed + 1), values);
  const auto c0 = test::random_vector(uint64_t(p.M) * p.N, seed + 2);
  const bool half = ops::is_half(p.a_format);
  auto ba = test::to_device(dev, half ? test::packed(a, values) : a, "A");
  auto bb = test::to_device(dev, half ? test::packed(b, values) : b, "B");
  auto bc = test::to_device(dev, c0, "C");
  // Garbage in the workspace: the parts never read what it held.
  auto work = test::to_device(dev, test::random_vector(workspace_floats, seed + 3, -1e3f, 1e3f), "workspace");
  vk::Commands cmd(dev, "split");
  cmd.set_workspace(vk::View(work));
  ops::matmul(cmd, ba, bb, bc, p);
  cmd.run();
  std::vector<double> want = p.accumulate ? test::to_double(c0) : std::vector<double>(c0.size(), 0.0);
  ref::matmul<double>(test::to_double(a), test::to_double(b), want, p, std::span<const double>());
  const std::vector<float> got = test::to_host(bc);
  test::check_close(got, test::to_float(want), 1e-3, 1e-5, std::to_string(p.M) + "x" + std::to_string(p.N) + "x" +
                                                              std::to_string(p.K) + (p.trans_a ? " A^T" : "") +
                                                              (p.trans_b ? " B^T" : "") +
                                                              (p.accumulate ? " accumulate" : "") + " " +
                                                              p.tiling->name());
  return got;
}

// Weight-gradient shapes and odd ones: a K no part divides, parts of one tile, C's edges.
void check_tiling(vk::Device& dev, const MatmulTiling& t, Precision values, uint32_t seed) {
  const Precision stored = t.variant == MatmulTiling::Variant::Matrix ? values : Precision::Fp32;
  struct Shape {
    uint32_t M, N, K, parts;
    bool trans_a, trans_b, accumulate;
  };
  for (const Shape& s : {Shape{40, 36, 300, 4, true, false, true},  // dW = dy^T x, accumulated
                         Shape{33, 21, 100, 8, false, true, false},  // parts past the end of K
                         Shape{24, 40, 70, 3, true, true, true}}) {
    MatmulParams p{.M = s.M, .N = s.N, .K = s.K, .trans_a = s.trans_a, .trans_b = s.trans_b,
                   .accumulate = s.accumulate, .alpha = s.accumulate ? 0.5f : 1.0f};
    p.a_format = p.b_format = stored, p.tiling = parts_of(t, s.parts);
    const uint64_t floats = uint64_t(s.parts) * s.M * s.N;
    const std::vector<float> first = check_split(dev, p, values, seed, floats);
    // The same bits again: the parts are added in order, not as they finish.
    CHECK(check_split(dev, p, values, seed, floats) == first);
    seed += 10;
  }
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "a product split along K on shared tiles matches the CPU reference") {
  check_tiling(device(), kShared, Precision::Fp32, 100);
}

TEST_CASE_FIXTURE(test::Gpu, "a product split along K on matrix units or their plain tiles matches the CPU reference"
                  * doctest::test_suite("not on SwiftShader")) {
  if (test::is_swiftshader(device().info())) {
    MESSAGE("not on this device: SwiftShader has no matrix units (the plain build runs on lavapipe)");
    return;
  }
  check_tiling(device(), ops::emulated_matrix_tiling(16, 16, 16, 32), Precision::Bf16, 200);
  MatmulTiling doubled = ops::emulated_matrix_tiling(16, 8, 16, 8);
  doubled.stages = 2;
  check_tiling(device(), doubled, Precision::Fp16, 300);
  doubled.ahead = 2;
  check_tiling(device(), doubled, Precision::Bf16, 350);
  for (Precision p : {Precision::Fp16, Precision::Bf16})
    if (const std::optional<MatmulTiling> units = ops::matrix_tiling(device().info(), p)) {
      MESSAGE("on the device's matrix units: " << units->name());
      check_tiling(device(), *units, p, 400);
      MatmulTiling ahead = *units;  // and with two K tiles in flight, C's blocks in groups of 2 rows
      ahead.stages = 2, ahead.ahead = 2, ahead.group = 2;
      check_tiling(device(), ahead, p, 450);
    }
}

TEST_CASE_FIXTURE(test::Gpu, "a split product refuses too small a workspace and what it cannot split") {
  vk::Device& dev = device();
  auto a = test::zeros(dev, 4096, "A"), b = test::zeros(dev, 4096, "B"), c = test::zeros(dev, 4096, "C");
  auto work = test::zeros(dev, 1000, "workspace");
  vk::Commands cmd(dev, "refusals");
  const MatmulParams p{.M = 16, .N = 16, .K = 64, .tiling = parts_of(kShared, 4)};
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, c, p), doctest::Contains("bytes of workspace; the recording has 0"),
                       InternalError);
  cmd.set_workspace(vk::View(work));  // 4000 bytes, four parts of 16x16 floats need 4096
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, c, p), doctest::Contains("needs 4096 bytes of workspace"), InternalError);
  MatmulParams batched = p;
  batched.batch = 2, batched.stride_c = 256;
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, c, batched), doctest::Contains("one product of a plain fp32 C"),
                       InternalError);
  MatmulParams registers = p;
  registers.tiling = parts_of(MatmulTiling{}, 2);
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, c, registers), doctest::Contains("only the staged kernels split K"),
                       InternalError);
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, c, p, vk::View(b)), doctest::Contains("adds no bias"), InternalError);
}

// On a GPU a product splits where its largest blocks are fewer than 256 and its K is long:
// gpt2-small's weight gradients over 16 windows of 1024 tokens.
TEST_CASE("a GPU splits the K of products with few blocks and a long K, and nothing else") {
  vk::PhysicalInfo gpu = test::synthetic_gpu(vk::MatrixShape::Element::Bf16);
  const uint64_t workspace = ops::matmul_workspace_bytes(gpu);
  CHECK(workspace == uint64_t(32) << 20);
  vk::PhysicalInfo cpu = gpu;
  cpu.type = VK_PHYSICAL_DEVICE_TYPE_CPU;
  CHECK(ops::matmul_workspace_bytes(cpu) == 0);

  const auto split = [&](MatmulParams p) {
    const MatmulTiling t = ops::matmul_tiling(gpu, p.M, p.N);
    return ops::split_tiling(gpu, t, p, workspace);
  };
  // fp32 on shared tiles, 64x128 blocks: 768 x 768 is 72 of them, so four parts of 4096.
  const MatmulTiling dw = split({.M = 768, .N = 768, .K = 16384, .trans_a = true, .accumulate = true});
  CHECK(dw.variant == MatmulTiling::Variant::Shared);
  CHECK(dw.wg_y * dw.tm == 64);
  CHECK(dw.wg_x * dw.tn == 128);
  CHECK(dw.k_parts == 4);
  CHECK(split({.M = 768, .N = 2304, .K = 16384, .trans_a = true}).k_parts == 2);  // 216 blocks
  CHECK(split({.M = 768, .N = 3072, .K = 16384, .trans_a = true}).k_parts == 1);  // 288 blocks
  CHECK(split({.M = 256, .N = 768, .K = 16384, .trans_a = true}).k_parts == 16);  // lm_head's: 24 blocks
  CHECK(split({.M = 256, .N = 768, .K = 2048, .trans_a = true}).k_parts == 2);    // parts of 1024 at least
  CHECK(split({.M = 4096, .N = 4096, .K = 16384}).k_parts == 1);                  // enough blocks
  CHECK(split({.M = 768, .N = 768, .K = 1024}).k_parts == 1);                     // too short a K
  CHECK(split({.M = 768, .N = 768, .K = 16384, .batch = 2, .stride_c = 768 * 768}).k_parts == 1);
  CHECK(split({.M = 768, .N = 768, .K = 16384, .ldc = 800}).k_parts == 1);
  CHECK(split({.M = 768, .N = 768, .K = 16384, .epilogue = MatmulParams::Epilogue::Relu}).k_parts == 1);
  // Parts that do not fit the workspace are fewer: 16 parts of lm_head's 256 x 768 are 12 MiB.
  const MatmulParams lm{.M = 256, .N = 768, .K = 16384, .trans_a = true};
  CHECK(ops::split_tiling(gpu, ops::matmul_tiling(gpu, lm.M, lm.N), lm, 4u << 20).k_parts == 4);
  CHECK(ops::split_tiling(gpu, ops::matmul_tiling(gpu, lm.M, lm.N), lm, 0).k_parts == 1);

  // bf16 on matrix units, 128x128 blocks: 768 x 768 is 36 of them, eight parts.
  MatmulParams half{.M = 768, .N = 768, .K = 16384, .trans_a = true, .accumulate = true};
  half.a_format = half.b_format = Precision::Bf16;
  const std::optional<MatmulTiling> small = ops::default_matrix_tiling(gpu, Precision::Bf16, half.M, half.N);
  if (!small) {  // a build without the cooperative-matrix kernels (tools/install-glslang.sh)
    CHECK_FALSE(vk::has_shader("matmul_tiles_coopmat_bf16"));
    MESSAGE("not in this build: no cooperative-matrix kernels (tools/install-glslang.sh)");
    return;
  }
  CHECK(small->tm == 2);  // unsplit, the small blocks
  const MatmulTiling units = ops::split_tiling(gpu, *small, half, workspace);
  CHECK(units.variant == MatmulTiling::Variant::Matrix);
  CHECK(units.tm == 4);
  CHECK(units.k_parts == 8);
  CHECK(units.name().find("K in 8 parts") != std::string::npos);
  // Where the large blocks are too few but blocks half as wide are enough, those, whole (the
  // MLP's weight gradients: 144 large blocks, 288 of 128x64); 2304 x 768 still splits (216).
  for (const auto& [M, N] : {std::pair{768u, 3072u}, std::pair{3072u, 768u}}) {
    MatmulParams mlp = half;
    mlp.M = M, mlp.N = N;
    const MatmulTiling narrow = ops::split_tiling(gpu, *ops::default_matrix_tiling(gpu, Precision::Bf16, M, N), mlp, workspace);
    CHECK(narrow.tm == 4);
    CHECK(narrow.tn == 2);
    CHECK(narrow.stages == 2);
    CHECK(narrow.k_parts == 1);
  }
  MatmulParams qkv = half;
  qkv.M = 2304;
  CHECK(ops::split_tiling(gpu, *ops::default_matrix_tiling(gpu, Precision::Bf16, qkv.M, qkv.N), qkv, workspace).k_parts == 4);
  // Too short a K to split keeps the small blocks.
  MatmulParams short_k = half;
  short_k.N = 3072, short_k.K = 1024;
  CHECK(ops::split_tiling(gpu, *small, short_k, workspace).tm == 2);
}

}  // namespace kernels_matmul_split_test
