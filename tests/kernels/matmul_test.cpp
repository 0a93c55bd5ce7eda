#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <optional>
#include <span>
#include <cmath>
#include <string>
#include <vector>

#include "check.h"
#include "gpu.h"
#include "grid_cap.h"
#include "ops/matmul.h"
#include "ops/product_capture.h"
#include "ref/activation.h"
#include "ref/matmul.h"
#include "util/error.h"
#include "vk/commands.h"
#include "vk/kernel.h"

namespace kernels_matmul_test {

using namespace brigade;
using ops::MatmulParams;
using ops::MatmulTiling;

namespace {

// fp32 sums of up to 129 products of values in [-1, 1] against a double reference.
constexpr double kAtol = 1e-4, kRtol = 1e-5;

// Both variants whatever the device, so lavapipe tests the GPU kernel too. The first is
// the CPU default on a device with subgroups of 8 (others fall back to plain loads), the
// second the default's shape where it computes fewer rows past M.
const MatmulTiling kSubgroupRegisters{MatmulTiling::Variant::Registers, 8, 8, 32, 4, 16, 8};
const MatmulTiling kSubgroupRegisters16x8{MatmulTiling::Variant::Registers, 8, 8, 16, 8, 16, 8};
const MatmulTiling kRegisters{MatmulTiling::Variant::Registers, 8, 8, 8, 8, 16, 0};
const MatmulTiling kShared{MatmulTiling::Variant::Shared, 16, 16, 4, 4, 16, 0};
// A GPU's tiling for large products: 64x128 blocks of 8x8 outputs per invocation.
const MatmulTiling kShared64x128{MatmulTiling::Variant::Shared, 16, 8, 8, 8, 8, 0};

struct Shape {
  uint32_t M, N, K;
};
// Odd sizes, sizes under one tile, multiples of 4 (where vec4 loads are taken), and M and N
// multiples of 4 with an odd K (vec4 loads across the block, the last k one by one).
const Shape kShapes[] = {{1, 1, 1}, {7, 13, 5}, {6, 9, 12}, {16, 32, 12}, {16, 32, 9}, {65, 33, 129}};

std::string describe(const MatmulParams& p) {
  return std::to_string(p.M) + "x" + std::to_string(p.N) + "x" + std::to_string(p.K) +
         (p.trans_a ? " A^T" : "") + (p.trans_b ? " B^T" : "") +
         (p.accumulate ? " accumulate" : "") + " batch " + std::to_string(p.batch) +
         (p.terms > 1 ? " terms " + std::to_string(p.terms) : "") +
         (p.bias_rows ? " row bias" : "") +
         (p.tiling ? " " + p.tiling->name() : "");
}

// Elements up to the end of the last of `count` matrices of `rows` stored rows.
uint64_t grid_end(const MatmulParams& p, uint64_t count, uint32_t offset, uint32_t stride,
                  uint32_t head_stride, uint32_t rows, uint32_t ld) {
  return offset + (count / p.heads - 1) * stride + uint64_t(p.heads - 1) * head_stride + uint64_t(rows) * ld;
}
uint64_t elements(const MatmulParams& p, bool a) {
  const uint32_t rows = a ? (p.trans_a ? p.K : p.M) : (p.trans_b ? p.N : p.K);
  return a ? grid_end(p, uint64_t(p.batch) * p.terms, p.offset_a, p.stride_a, p.head_stride_a, rows, p.ld_a())
           : grid_end(p, uint64_t(p.batch) * p.terms, p.offset_b, p.stride_b, p.head_stride_b, rows, p.ld_b());
}
uint64_t elements_c(const MatmulParams& p) {
  return grid_end(p, p.batch, p.offset_c, p.stride_c, p.head_stride_c, p.M, p.ld_c());
}

// Runs matmul on random A and B (and a random bias, if asked) with C starting as `c0`;
// checks it against the reference.
void check_matmul(vk::Device& dev, const MatmulParams& p, const std::vector<float>& c0,
                  uint32_t seed, bool with_bias = false) {
  const auto a = test::random_vector(elements(p, true), seed);
  const auto b = test::random_vector(elements(p, false), seed + 1);
  const auto bias = test::random_vector(p.bias_rows ? p.M : p.N, seed + 2);
  auto ba = test::to_device(dev, a, "A"), bb = test::to_device(dev, b, "B");
  auto bbias = test::to_device(dev, bias, "bias"), bc = test::to_device(dev, c0, "C");
  vk::Commands cmd(dev, "matmul");
  ops::matmul(cmd, ba, bb, bc, p, with_bias ? std::optional<vk::View>(bbias) : std::nullopt);
  cmd.run();
  auto want = test::to_double(c0);
  const auto bias_d = test::to_double(bias);
  ref::matmul<double>(test::to_double(a), test::to_double(b), want, p,
                      with_bias ? std::span<const double>(bias_d) : std::span<const double>());
  test::check_close(test::to_host(bc), test::to_float(want), kAtol, kRtol,
                    describe(p) + (with_bias ? " with bias" : ""));
}

void check_shapes(vk::Device& dev, const MatmulTiling& tiling, bool trans_a, bool trans_b) {
  uint32_t seed = 0;
  for (const Shape& s : kShapes) {
    const MatmulParams p{.M = s.M, .N = s.N, .K = s.K, .trans_a = trans_a, .trans_b = trans_b,
                         .tiling = tiling};
    check_matmul(dev, p, std::vector<float>(size_t(s.M) * s.N, 0.0f), seed += 2);
  }
}

void check_every_transpose(vk::Device& dev, const MatmulTiling& tiling) {
  for (int t = 0; t < 4; ++t) check_shapes(dev, tiling, t & 1, t & 2);
}

}  // namespace

// The register kernel places invocations by subgroup where it shares A, trusting
// gl_SubgroupSize, which Intel's driver reports as 32 while it may run 8 or 16 wide: where a
// device runs several sizes the pipeline requires the tiling's (in full subgroups), and one
// that cannot require it does not take such a tiling.
TEST_CASE("the register kernel shares A by subgroups only in subgroups of the size it was built for") {
  const MatmulTiling sharing{MatmulTiling::Variant::Registers, 32, 2, 32, 4, 16, 32};
  vk::PhysicalInfo intel;
  intel.name = "an Intel GPU";
  intel.type = VK_PHYSICAL_DEVICE_TYPE_CPU;  // where matmul_tiling shares A
  intel.subgroup_size = 32, intel.min_subgroup_size = 8, intel.max_subgroup_size = 32;
  intel.subgroup_size_control = intel.full_subgroups = true;
  CHECK(ops::sharing_subgroup_size(intel, sharing) == 32u);
  CHECK(ops::matmul_tiling(intel).subgroup == 32);
  intel.full_subgroups = false;
  CHECK_FALSE(ops::sharing_subgroup_size(intel, sharing));
  intel.subgroup_size_control = false, intel.full_subgroups = true;
  CHECK_FALSE(ops::sharing_subgroup_size(intel, sharing));
  CHECK(ops::matmul_tiling(intel).subgroup == 0);  // plain loads instead
  CHECK(ops::sharing_subgroup_size(intel, MatmulTiling{MatmulTiling::Variant::Registers, 8, 8, 8, 8, 16, 0}) == 0u);
  // A size outside what it runs (AMD's 32 to 64, a tiling of 8): never gl_SubgroupSize there,
  // so the kernel takes plain loads and nothing need be required.
  vk::PhysicalInfo amd = intel;
  amd.subgroup_size = 64, amd.min_subgroup_size = 32, amd.max_subgroup_size = 64;
  MatmulTiling narrow = sharing;
  narrow.wg_x = narrow.subgroup = 8;
  CHECK(ops::sharing_subgroup_size(amd, narrow) == 0u);
  // lavapipe: one size, 8. Required where it can be, else its gl_SubgroupSize tells the truth.
  vk::PhysicalInfo cpu = intel;
  cpu.subgroup_size = cpu.min_subgroup_size = cpu.max_subgroup_size = 8;
  CHECK(ops::sharing_subgroup_size(cpu, sharing) == 0u);  // 32 is not its size: plain loads in the kernel
  MatmulTiling eight = sharing;
  eight.wg_x = eight.subgroup = 8;
  CHECK(ops::sharing_subgroup_size(cpu, eight) == 0u);
  cpu.subgroup_size_control = true;
  CHECK(ops::sharing_subgroup_size(cpu, eight) == 8u);
}

// A pipeline of a required subgroup size holds at most maxComputeWorkgroupSubgroups subgroups
// a workgroup (VUID-VkPipelineShaderStageCreateInfo-pNext-02756), and one in full subgroups
// an x that is a multiple of their size: refused with the limit named, before Vulkan sees it.
TEST_CASE("a kernel's workgroup fits the subgroups its pipeline requires") {
  vk::PhysicalInfo gpu;
  gpu.name = "a GPU";
  gpu.min_subgroup_size = 8, gpu.max_subgroup_size = 32, gpu.max_compute_workgroup_subgroups = 32;
  CHECK_NOTHROW(vk::check_subgroups(gpu, "k", {256, 1, 1}, 8, true));
  CHECK_NOTHROW(vk::check_subgroups(gpu, "k", {1024, 1, 1}, 0, false));
  CHECK_THROWS_WITH_AS(vk::check_subgroups(gpu, "k", {512, 1, 1}, 8, false),
                       doctest::Contains("more than the 32 subgroups a workgroup a GPU allows"), UserError);
  CHECK_THROWS_WITH_AS(vk::check_subgroups(gpu, "k", {32, 16, 1}, 8, false),
                       doctest::Contains("(maxComputeWorkgroupSubgroups): at most 256 invocations"), UserError);
  CHECK_THROWS_AS(vk::check_subgroups(gpu, "k", {12, 2, 1}, 8, true), UserError);
  CHECK_THROWS_AS(vk::check_subgroups(gpu, "k", {16, 1, 1}, 0, true), UserError);  // x a multiple of 32
  gpu.max_compute_workgroup_subgroups = 0;  // not listed: not checked
  CHECK_NOTHROW(vk::check_subgroups(gpu, "k", {1024, 1, 1}, 8, false));
}

// One test per transpose: each compiles a few pipelines, and lavapipe compiles slowly.
TEST_CASE_FIXTURE(test::Gpu, "register-blocked matmul with subgroup-shared loads matches the CPU reference for A B") {
  check_shapes(device(), kSubgroupRegisters, false, false);
}

TEST_CASE_FIXTURE(test::Gpu, "register-blocked matmul with subgroup-shared loads matches the CPU reference for A^T B") {
  check_shapes(device(), kSubgroupRegisters, true, false);
}

TEST_CASE_FIXTURE(test::Gpu, "register-blocked matmul with subgroup-shared loads matches the CPU reference for A B^T") {
  check_shapes(device(), kSubgroupRegisters, false, true);
}

TEST_CASE_FIXTURE(test::Gpu, "register-blocked matmul with subgroup-shared loads matches the CPU reference for A^T B^T") {
  check_shapes(device(), kSubgroupRegisters, true, true);
}

TEST_CASE_FIXTURE(test::Gpu, "register-blocked matmul with 16x8 subgroup-shared blocks matches the CPU reference for every transpose") {
  check_every_transpose(device(), kSubgroupRegisters16x8);
}

TEST_CASE_FIXTURE(test::Gpu, "register-blocked matmul matches the CPU reference for every transpose and odd sizes") {
  check_every_transpose(device(), kRegisters);
}

TEST_CASE_FIXTURE(test::Gpu, "shared-memory matmul matches the CPU reference for every transpose and odd sizes") {
  check_every_transpose(device(), kShared);
  check_every_transpose(device(), kShared64x128);
  // Several 64x128 blocks each way, K an odd number of tiles with a ragged last one.
  uint32_t seed = 50;
  for (int t = 0; t < 4; ++t) {
    const MatmulParams p{.M = 260, .N = 200, .K = 37, .trans_a = bool(t & 1), .trans_b = bool(t & 2), .tiling = kShared64x128};
    check_matmul(device(), p, std::vector<float>(size_t(p.M) * p.N, 0.0f), seed += 2);
  }
}

TEST_CASE_FIXTURE(test::Gpu, "matmul is correct with tiles that divide nothing evenly") {
  // 3x5 outputs per invocation (no vec4 across the block); fewer rows per invocation than
  // lanes sharing them; shared tiles whose staging loops leave some invocations idle (one
  // 8x4 patch of invocations, 16 quads of A's tile), and shared tiles of invocations placed
  // row by row, each staging two quads of A and four of B, 4x8 outputs.
  const MatmulTiling odd[] = {{MatmulTiling::Variant::Registers, 4, 2, 3, 5, 16, 0},
                              {MatmulTiling::Variant::Registers, 16, 2, 4, 3, 16, 8},
                              {MatmulTiling::Variant::Shared, 8, 4, 4, 8, 4, 0},
                              {MatmulTiling::Variant::Shared, 4, 2, 4, 8, 8, 0}};
  uint32_t seed = 100;
  for (const MatmulTiling& tiling : odd)
    for (const Shape& s : {Shape{16, 32, 12}, Shape{23, 17, 11}})
      for (int t = 0; t < 4; ++t) {
        const MatmulParams p{.M = s.M, .N = s.N, .K = s.K, .trans_a = bool(t & 1),
                             .trans_b = bool(t & 2), .tiling = tiling};
        check_matmul(device(), p, std::vector<float>(size_t(s.M) * s.N, 0.0f), seed += 2);
      }
}

TEST_CASE_FIXTURE(test::Gpu, "matmul adds alpha times the product to C when accumulating") {
  for (const MatmulTiling& tiling : {kSubgroupRegisters, kShared})
    for (const Shape& s : {Shape{7, 13, 5}, Shape{16, 32, 12}}) {
      const MatmulParams p{.M = s.M, .N = s.N, .K = s.K, .accumulate = true, .alpha = -0.75f,
                           .tiling = tiling};
      check_matmul(device(), p, test::random_vector(size_t(s.M) * s.N, 7, -2.0f, 2.0f), 8);
    }
}

TEST_CASE_FIXTURE(test::Gpu, "matmul adds a bias to every row of C when given one") {
  for (const MatmulTiling& tiling : {kSubgroupRegisters, kShared})
    for (bool accumulate : {false, true}) {
      const MatmulParams p{.M = 13, .N = 12, .K = 8, .trans_b = true, .accumulate = accumulate,
                           .alpha = 1.5f, .tiling = tiling};
      check_matmul(device(), p, test::random_vector(13 * 12, 30), 31, true);
    }
}

TEST_CASE_FIXTURE(test::Gpu, "matmul adds a bias to every column of C when the bias is per row") {
  for (const MatmulTiling& tiling : {kSubgroupRegisters, kShared})
    for (const Shape& s : {Shape{13, 12, 8}, Shape{32, 16, 12}}) {
      const MatmulParams p{.M = s.M, .N = s.N, .K = s.K, .bias_rows = true, .tiling = tiling};
      check_matmul(device(), p, test::random_vector(size_t(s.M) * s.N, 32), 33, true);
    }
}

// The GELU epilogues, against the reference product followed by the reference GELU: a Linear's
// forward (B^T, a bias per column) that also writes gelu(C), and a backward-data product
// multiplied by gelu'(pre). Pre-activations reach |x| = 12, where tanh saturates.
TEST_CASE_FIXTURE(test::Gpu, "matmul's GELU epilogue writes C and gelu(C) in the same pass") {
  uint32_t seed = 300;
  for (const MatmulTiling& tiling : {kSubgroupRegisters, kShared})
    for (const Shape& s : {Shape{7, 13, 5}, Shape{16, 32, 12}, Shape{65, 33, 129}}) {
      const MatmulParams p{.M = s.M, .N = s.N, .K = s.K, .trans_b = true,
                           .epilogue = MatmulParams::Epilogue::Gelu, .tiling = tiling};
      const auto a = test::random_vector(size_t(s.M) * s.K, ++seed, -2.0f, 2.0f);
      const auto b = test::random_vector(size_t(s.N) * s.K, ++seed, -2.0f, 2.0f);
      const auto bias = test::random_vector(s.N, ++seed);
      auto ba = test::to_device(device(), a, "A"), bb = test::to_device(device(), b, "B");
      auto bbias = test::to_device(device(), bias, "bias");
      // C and the activation start as garbage: both are overwritten.
      auto bc = test::to_device(device(), test::random_vector(size_t(s.M) * s.N, ++seed), "C");
      auto bact = test::to_device(device(), test::random_vector(size_t(s.M) * s.N, ++seed), "act");
      vk::Commands cmd(device(), "matmul gelu");
      ops::matmul(cmd, ba, bb, bc, p, vk::View(bbias), vk::View(bact));
      cmd.run();
      std::vector<double> want(size_t(s.M) * s.N, 0.0), act(want.size());
      const auto bias_d = test::to_double(bias);
      ref::matmul<double>(test::to_double(a), test::to_double(b), want, p, bias_d);
      ref::gelu_forward(want.data(), act.data(), uint32_t(want.size()));
      test::check_close(test::to_host(bc), test::to_float(want), kAtol, kRtol, describe(p) + " C");
      test::check_close(test::to_host(bact), test::to_float(act), 2 * kAtol, kRtol, describe(p) + " gelu(C)");
    }
}

TEST_CASE_FIXTURE(test::Gpu, "matmul's GELU-gradient epilogue multiplies the product by gelu' of the pre-activation") {
  uint32_t seed = 400;
  for (const MatmulTiling& tiling : {kSubgroupRegisters, kShared})
    for (const Shape& s : {Shape{7, 13, 5}, Shape{16, 32, 12}, Shape{65, 33, 129}}) {
      const MatmulParams p{.M = s.M, .N = s.N, .K = s.K,
                           .epilogue = MatmulParams::Epilogue::GeluGrad, .tiling = tiling};
      const auto a = test::random_vector(size_t(s.M) * s.K, ++seed);
      const auto b = test::random_vector(size_t(s.K) * s.N, ++seed);
      const auto pre = test::random_vector(size_t(s.M) * s.N, ++seed, -12.0f, 12.0f);
      auto ba = test::to_device(device(), a, "A"), bb = test::to_device(device(), b, "B");
      auto bpre = test::to_device(device(), pre, "pre");
      auto bc = test::to_device(device(), test::random_vector(size_t(s.M) * s.N, ++seed), "C");
      vk::Commands cmd(device(), "matmul gelu gradient");
      ops::matmul(cmd, ba, bb, bc, p, std::nullopt, vk::View(bpre));
      cmd.run();
      std::vector<double> product(size_t(s.M) * s.N, 0.0), want(product.size(), 0.0);
      ref::matmul<double>(test::to_double(a), test::to_double(b), product, p, {});
      const auto pre_d = test::to_double(pre);
      ref::gelu_backward(pre_d.data(), product.data(), want.data(), uint32_t(want.size()));
      test::check_close(test::to_host(bc), test::to_float(want), kAtol, kRtol, describe(p));
      CHECK(test::to_host(bpre) == pre);  // read, never written
    }
}

// The ReLU epilogue (a Linear with its ReLU folded in): relu of the biased product, NaN
// passing, against the reference product; both register layouts (vec4 and one by one) and
// the shared variant.
TEST_CASE_FIXTURE(test::Gpu, "matmul's ReLU epilogue stores relu of the biased product") {
  uint32_t seed = 500;
  for (const MatmulTiling& tiling : {kSubgroupRegisters, kRegisters, kShared})
    for (const Shape& s : {Shape{7, 13, 5}, Shape{16, 32, 12}, Shape{65, 36, 129}}) {
      const MatmulParams p{.M = s.M, .N = s.N, .K = s.K, .trans_b = true,
                           .epilogue = MatmulParams::Epilogue::Relu, .tiling = tiling};
      auto a = test::random_vector(size_t(s.M) * s.K, ++seed);
      a[0] = std::numeric_limits<float>::quiet_NaN();  // row 0 of C is NaN throughout
      const auto b = test::random_vector(size_t(s.N) * s.K, ++seed);
      const auto bias = test::random_vector(s.N, ++seed);
      auto ba = test::to_device(device(), a, "A"), bb = test::to_device(device(), b, "B");
      auto bbias = test::to_device(device(), bias, "bias");
      auto bc = test::to_device(device(), test::random_vector(size_t(s.M) * s.N, ++seed), "C");
      vk::Commands cmd(device(), "matmul relu");
      ops::matmul(cmd, ba, bb, bc, p, vk::View(bbias));
      cmd.run();
      std::vector<double> want(size_t(s.M) * s.N, 0.0);
      ref::matmul<double>(test::to_double(a), test::to_double(b), want, p, test::to_double(bias));
      const std::vector<float> got = test::to_host(bc);
      size_t zeros = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        INFO(describe(p), " element ", i);
        if (std::isnan(want[i])) {
          CHECK(std::isnan(got[i]));
          continue;
        }
        zeros += want[i] < 0;
        CHECK(std::abs(double(got[i]) - std::max(want[i], 0.0)) <= kAtol + kRtol * std::abs(want[i]));
      }
      CHECK(zeros > 0);  // the mask did something
    }
}

// Each C[z] the sum of `terms` products (Conv2d's weight gradient over the samples), with
// operands that start past the beginning of their views: offsets that allow vec4 loads and
// offsets that do not, a K that is no multiple of the shared variant's tile depth.
TEST_CASE_FIXTURE(test::Gpu, "matmul sums several products into each C and starts each operand at its offset") {
  for (const MatmulTiling& tiling : {kSubgroupRegisters, kRegisters, kShared})
    for (uint32_t offset : {0u, 4u, 3u})
      for (int t = 0; t < 4; ++t) {
        MatmulParams p{.M = 12, .N = 16, .K = t < 2 ? 20u : 9u, .trans_a = bool(t & 1),
                       .trans_b = bool(t & 2), .accumulate = t == 3, .batch = 2, .terms = 3,
                       .tiling = tiling};
        p.stride_a = p.M * p.K + 4, p.stride_b = p.K * p.N, p.stride_c = p.M * p.N;
        p.offset_a = offset, p.offset_b = 2 * offset, p.offset_c = offset;
        check_matmul(device(), p, test::random_vector(elements_c(p), 40 + t), 41 + t, t == 2);
      }
}

TEST_CASE_FIXTURE(test::Gpu, "matmul without accumulate never reads what C held") {
  // C starts as NaN: reading it even to multiply by zero would show.
  const float nan = std::bit_cast<float>(0x7fc00000u);
  for (const MatmulTiling& tiling : {kSubgroupRegisters, kShared}) {
    const MatmulParams p{.M = 9, .N = 12, .K = 8, .alpha = 0.5f, .tiling = tiling};
    check_matmul(device(), p, std::vector<float>(9 * 12, nan), 9);
  }
}

// Rows padded past their length, gaps between batch matrices, and B shared by all.
void check_padded_batches(vk::Device& dev, const MatmulTiling& tiling) {
  for (int t = 0; t < 4; ++t) {
    MatmulParams p{.M = 10, .N = 7, .K = 9, .trans_a = bool(t & 1), .trans_b = bool(t & 2),
                   .accumulate = true, .batch = 3, .tiling = tiling};
    p.lda = p.ld_a() + 3, p.ldb = p.ld_b() + 1, p.ldc = p.N + 2;
    p.stride_a = (p.trans_a ? p.K : p.M) * p.lda + 5;
    p.stride_c = p.M * p.ldc + 4;
    check_matmul(dev, p, test::random_vector(elements_c(p), 11), 12 + t);
  }
}

// Leading dimensions and strides that are multiples of 4: the vec4 loads, batched.
void check_aligned_batches(vk::Device& dev, const MatmulTiling& tiling, bool trans_b) {
  for (bool trans_a : {false, true}) {
    MatmulParams q{.M = 8, .N = 12, .K = 16, .trans_a = trans_a, .trans_b = trans_b,
                   .batch = 2, .tiling = tiling};
    q.lda = q.ld_a() + 4, q.ldb = q.ld_b() + 8;
    q.stride_a = (q.trans_a ? q.K : q.M) * q.lda + 4;
    q.stride_b = (q.trans_b ? q.N : q.K) * q.ldb;
    q.stride_c = q.M * q.N;
    check_matmul(dev, q, std::vector<float>(elements_c(q), 0.0f), 20 + trans_a + 2 * trans_b);
  }
}

TEST_CASE_FIXTURE(test::Gpu, "batched matmul follows strides and leading dimensions and repeats a zero-stride operand") {
  check_padded_batches(device(), kSubgroupRegisters);
}

TEST_CASE_FIXTURE(test::Gpu, "batched matmul takes vec4 loads where strides and leading dimensions allow") {
  check_aligned_batches(device(), kSubgroupRegisters, false);
}

TEST_CASE_FIXTURE(test::Gpu, "batched matmul with B transposed takes vec4 loads where strides and leading dimensions allow") {
  check_aligned_batches(device(), kSubgroupRegisters, true);
}

TEST_CASE_FIXTURE(test::Gpu, "batched shared-memory matmul follows strides and leading dimensions") {
  check_padded_batches(device(), kShared);
  check_aligned_batches(device(), kShared, false);
  check_aligned_batches(device(), kShared, true);
}

// Attention's layout: 2 samples of 3 heads each, heads side by side in every token row (head
// stride = the head's width, leading dimension = the row), C packed or in token rows too, C
// accumulated; heads 4 wide (vec4) and 5 wide (floats).
void check_head_grids(vk::Device& dev, const MatmulTiling& tiling) {
  for (uint32_t hs : {4u, 5u})
    for (int t = 0; t < 4; ++t) {
      const uint32_t T = 9, row = 3 * hs + 4;
      MatmulParams p{.M = T, .N = t & 2 ? T : hs, .K = t & 2 ? hs : T, .trans_a = bool(t & 1),
                     .trans_b = t == 2, .accumulate = t != 2, .batch = 6, .tiling = tiling};
      p.heads = 3, p.lda = row, p.ldb = row, p.stride_a = T * row + 8, p.stride_b = T * row;
      p.head_stride_a = hs, p.head_stride_b = hs, p.offset_a = 4, p.offset_b = hs;
      if (t & 2) {  // scores: packed (T,T) per head
        p.stride_c = 3 * T * T, p.head_stride_c = T * T;
      } else {  // heads in token rows
        p.ldc = row, p.stride_c = T * row, p.head_stride_c = hs, p.offset_c = 2 * hs;
      }
      check_matmul(dev, p, test::random_vector(elements_c(p), 40 + t), 41 + t);
    }
}

TEST_CASE_FIXTURE(test::Gpu, "matmul reads a grid of heads inside token rows as attention lays them out") {
  check_head_grids(device(), kSubgroupRegisters);
  check_head_grids(device(), kShared);
  MatmulParams p{.M = 2, .N = 2, .K = 2, .batch = 4, .stride_c = 4};
  p.heads = 3, p.head_stride_c = 4;
  vk::Commands cmd(device(), "grid");
  auto buffer = test::zeros(device(), 64, "any");
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, buffer, buffer, buffer, p),
                       doctest::Contains("a grid of 3 heads needs a batch of whole rows of heads"), InternalError);
}

// A product of more blocks of C than a dispatch's grid holds (lowered to 2 workgroups a
// dimension): C's rows, then its columns, in chunks that fit, each at its offsets, for every
// transpose, a bias along either side, the GELU, GELU-gradient and ReLU epilogues, and a grid
// of heads; every C (and the epilogue's tensor) what one dispatch would write.
TEST_CASE_FIXTURE(test::Gpu, "matmul walks C's rows and columns past a dispatch's grid in chunks") {
  const test::GridCap two(2);
  uint32_t seed = 900;
  using Epilogue = MatmulParams::Epilogue;
  for (const MatmulTiling& tiling : {kRegisters, kShared, kSubgroupRegisters}) {
    // kRegisters and kShared: 64x64 blocks, kSubgroupRegisters 256x32.
    const Shape s = tiling.tm == 32 ? Shape{600, 70, 9} : Shape{200, 150, 9};
    for (int t = 0; t < 4; ++t) {
      const MatmulParams p{.M = s.M, .N = s.N, .K = s.K, .trans_a = bool(t & 1), .trans_b = bool(t & 2),
                           .accumulate = t == 3, .alpha = 0.5f, .bias_rows = t == 1, .tiling = tiling};
      const uint32_t c_seed = ++seed, ab_seed = ++seed;
      check_matmul(device(), p, test::random_vector(size_t(s.M) * s.N, c_seed), ab_seed, t != 0);
    }
    for (const Epilogue e : {Epilogue::Gelu, Epilogue::GeluGrad, Epilogue::Relu}) {
      const MatmulParams p{.M = s.M, .N = s.N, .K = s.K, .trans_b = true, .epilogue = e, .tiling = tiling};
      CAPTURE(int(e));
      const auto a = test::random_vector(size_t(s.M) * s.K, ++seed), b = test::random_vector(size_t(s.N) * s.K, ++seed);
      const auto bias = test::random_vector(s.N, ++seed), pre = test::random_vector(size_t(s.M) * s.N, ++seed, -4, 4);
      auto ba = test::to_device(device(), a, "A"), bb = test::to_device(device(), b, "B");
      auto bbias = test::to_device(device(), bias, "bias"), bpre = test::to_device(device(), pre, "pre or act");
      auto bc = test::to_device(device(), test::random_vector(size_t(s.M) * s.N, ++seed), "C");
      vk::Commands cmd(device(), "matmul epilogue in chunks");
      const bool grad = e == Epilogue::GeluGrad;
      {
        // `bench products` sees the one product, not its chunks.
        const ops::ProductCapture capture;
        ops::matmul(cmd, ba, bb, bc, p, grad ? std::nullopt : std::optional<vk::View>(bbias),
                    e == Epilogue::Relu ? std::nullopt : std::optional<vk::View>(bpre));
        REQUIRE(capture.products().size() == 1);
        CHECK(capture.products()[0].params.M == s.M);
      }
      cmd.run();
      std::vector<double> product(size_t(s.M) * s.N, 0.0), want(product.size(), 0.0);
      const auto bias_d = test::to_double(bias), pre_d = test::to_double(pre);
      ref::matmul<double>(test::to_double(a), test::to_double(b), product, p,
                          grad ? std::span<const double>() : std::span<const double>(bias_d));
      if (grad) ref::gelu_backward(pre_d.data(), product.data(), want.data(), uint32_t(want.size()));
      else if (e == Epilogue::Gelu) ref::gelu_forward(product.data(), want.data(), uint32_t(want.size()));
      else for (size_t i = 0; i < want.size(); ++i) want[i] = std::max(product[i], 0.0);
      const std::vector<float> c = test::to_host(bc), other = test::to_host(bpre);
      test::check_close(grad || e == Epilogue::Relu ? c : other, test::to_float(want), 2 * kAtol, kRtol, describe(p));
      if (e == Epilogue::Gelu) test::check_close(c, test::to_float(product), kAtol, kRtol, describe(p) + " C");
    }
    // Two samples of two heads inside token rows, 130 rows each.
    const uint32_t T = 130, hs = 5, row = 2 * hs + 4;
    MatmulParams p{.M = T, .N = hs, .K = T, .accumulate = true, .batch = 2, .tiling = tiling};
    p.heads = 2, p.lda = T, p.ldb = row, p.ldc = row, p.stride_a = 2 * T * T, p.head_stride_a = T * T;
    p.stride_b = T * row, p.head_stride_b = hs, p.offset_b = 4, p.stride_c = T * row, p.head_stride_c = hs, p.offset_c = 2;
    const uint32_t c_seed = ++seed, ab_seed = ++seed;
    check_matmul(device(), p, test::random_vector(elements_c(p), c_seed), ab_seed);
  }
}

// Causal attention's products: with op(A) zero right of its diagonal (KToRow) or left of it
// (KFromRow) the product is the whole one; SkipAbove's C is the whole one on and below the
// diagonal. T = 9 lies in one block, T = 70 across several; K = T with vec4 loads and a tail.
void check_causal(vk::Device& dev, std::optional<MatmulTiling> tiling) {
  using Causal = MatmulParams::Causal;
  for (uint32_t T : {9u, 70u, 128u})
    for (const Causal causal : {Causal::SkipAbove, Causal::KToRow, Causal::KFromRow}) {
      const bool skip = causal == Causal::SkipAbove;
      MatmulParams p{.M = T, .N = skip ? T : 8, .K = skip ? 12 : T, .trans_a = causal == Causal::KFromRow,
                     .trans_b = skip, .accumulate = !skip, .batch = 2, .causal = causal, .tiling = tiling};
      p.stride_a = p.M * p.K, p.stride_b = p.N * p.K, p.stride_c = p.M * p.N;
      auto a = test::random_vector(elements(p, true), T);
      if (!skip)  // op(A)[m][k] = 0 where the product may leave it out
        for (uint32_t z = 0; z < p.batch; ++z)
          for (uint32_t m = 0; m < p.M; ++m)
            for (uint32_t k = 0; k < p.K; ++k)
              if (causal == Causal::KToRow ? k > m : k < m)
                a[z * p.stride_a + (p.trans_a ? k * p.M + m : m * p.K + k)] = 0.0f;
      const auto b = test::random_vector(elements(p, false), T + 1), c0 = test::random_vector(elements_c(p), T + 2);
      auto ba = test::to_device(dev, a, "A"), bb = test::to_device(dev, b, "B"), bc = test::to_device(dev, c0, "C");
      vk::Commands cmd(dev, "causal");
      ops::matmul(cmd, ba, bb, bc, p);
      cmd.run();
      auto want = test::to_double(c0);
      ref::matmul<double>(test::to_double(a), test::to_double(b), want, p);
      auto got = test::to_host(bc);
      if (skip)  // above the diagonal C is unspecified: compare what lies on and below it
        for (uint32_t z = 0; z < p.batch; ++z)
          for (uint32_t m = 0; m < T; ++m)
            for (uint32_t n = m + 1; n < T; ++n) got[z * p.stride_c + m * T + n] = float(want[z * p.stride_c + m * T + n]);
      test::check_close(got, test::to_float(want), kAtol, kRtol, describe(p) + " causal " + std::to_string(int(causal)));
    }
}

TEST_CASE_FIXTURE(test::Gpu, "matmul leaves out what a causal product does not need and nothing more") {
  check_causal(device(), std::nullopt);
  check_causal(device(), kSubgroupRegisters);
  check_causal(device(), kRegisters);
  check_causal(device(), kShared);
}

TEST_CASE_FIXTURE(test::Gpu, "matmul reads and writes only inside the views it is given") {
  // A, B and C are views into the middle of larger buffers whose other contents must survive.
  vk::Device& dev = device();
  const MatmulParams p{.M = 5, .N = 6, .K = 7};
  // Offsets of 64, 128 and 192 floats: multiples of 256 bytes, the largest storage-offset
  // alignment Vulkan allows (SwiftShader's).
  const auto a = test::random_vector(64 + 35, 1), b = test::random_vector(128 + 42, 2);
  const auto c = test::random_vector(192 + 30 + 32, 3);
  auto ba = test::to_device(dev, a, "A"), bb = test::to_device(dev, b, "B");
  auto bc = test::to_device(dev, c, "C");
  vk::Commands cmd(dev, "views");
  ops::matmul(cmd, {ba, 64 * 4, 35 * 4}, {bb, 128 * 4, 42 * 4}, {bc, 192 * 4, 30 * 4}, p);
  cmd.run();
  const auto ad = test::to_double(a), bd = test::to_double(b);
  auto want = test::to_double(c);
  ref::matmul<double>(std::span(ad).subspan(64), std::span(bd).subspan(128),
                      std::span(want).subspan(192, 30), p);
  test::check_close(test::to_host(bc), test::to_float(want), kAtol, kRtol, "C with its surroundings");
}

TEST_CASE_FIXTURE(test::Gpu, "matmul refuses views too small for the shape it is given") {
  vk::Device& dev = device();
  auto a = test::zeros(dev, 12, "A"), b = test::zeros(dev, 12, "B"), c = test::zeros(dev, 8, "C");
  vk::Commands cmd(dev, "small");
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, c, {.M = 3, .N = 4, .K = 3}),
                       doctest::Contains("C: view of 'C' holds 32 bytes"), InternalError);
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, c, {.M = 2, .N = 4, .K = 3, .lda = 2}),
                       doctest::Contains("A: leading dimension 2 is less than"), InternalError);
}

TEST_CASE("matmul gradients expressed as matmuls match finite differences") {
  // L = sum(C * R) with C = op(A) op(B). dop(A) = R op(B)^T and dop(B) = op(A)^T R; each is
  // one reference matmul over the stored operands, whatever their transposes (this is how
  // Linear and attention write their backward passes).
  const uint32_t M = 3, N = 4, K = 5;
  const auto r = test::to_double(test::random_vector(M * N, 3));
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    const MatmulParams p{.M = M, .N = N, .K = K, .trans_a = ta, .trans_b = tb};
    const auto a = test::to_double(test::random_vector(M * K, 10 + t));
    const auto b = test::to_double(test::random_vector(K * N, 20 + t));
    auto loss = [&](const std::vector<double>& aa, const std::vector<double>& bb) {
      std::vector<double> c(M * N);
      ref::matmul<double>(aa, bb, c, p);
      double l = 0;
      for (size_t i = 0; i < c.size(); ++i) l += c[i] * r[i];
      return l;
    };
    // Stored dA: (M,K) = R op(B)^T, or (K,M) = op(B) R^T.
    std::vector<double> da(M * K), db(K * N);
    if (!ta)
      ref::matmul<double>(r, b, da, {.M = M, .N = K, .K = N, .trans_b = !tb});
    else
      ref::matmul<double>(b, r, da, {.M = K, .N = M, .K = N, .trans_a = tb, .trans_b = true});
    // Stored dB: (K,N) = op(A)^T R, or (N,K) = R^T op(A).
    if (!tb)
      ref::matmul<double>(a, r, db, {.M = K, .N = N, .K = M, .trans_a = !ta});
    else
      ref::matmul<double>(r, a, db, {.M = N, .N = K, .K = M, .trans_a = true, .trans_b = ta});
    const std::string what = std::string(ta ? "A^T" : "A") + (tb ? " B^T" : " B");
    test::check_gradient([&](const std::vector<double>& x) { return loss(x, b); }, a, da, 1e-6,
                         1e-7, "dA for " + what);
    test::check_gradient([&](const std::vector<double>& x) { return loss(a, x); }, b, db, 1e-6,
                         1e-7, "dB for " + what);
  }
}

}  // namespace kernels_matmul_test
