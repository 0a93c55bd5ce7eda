// The matrix-unit kernel (shaders/matmul_tiles.comp). On plain invocations its tile
// operations sum over K in order, as the SIMT kernel does, so on the same 16-bit values it
// stores the SIMT kernel's bits, whatever the transposes, epilogue, C format, batch, terms or
// matrix shape (and the SIMT kernel's own tests hold it to the CPU reference); on a device
// with matrix units, the cooperative-matrix build runs the same cases against the SIMT kernel
// within fp32 rounding of a different summation order.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "check.h"
#include "gpu.h"
#include "half_check.h"
#include "ops/matmul.h"
#include "ops/matmul_candidates.h"
#include "ops/attention_tiles.h"
#include "ops/matmul_tiles.h"
#include "ref/matmul.h"
#include "util/error.h"
#include "vk/commands.h"
#include "vk/spirv.h"

namespace kernels_matmul_tiles_test {

using namespace brigade;
using ops::MatmulParams;
using ops::MatmulTiling;
using ops::Precision;
using Epilogue = MatmulParams::Epilogue;
using test::check_bits, test::packed, test::rounded;

namespace {

// A product with everything a layer may ask of it.
struct Case {
  uint32_t M, N, K;
  bool trans_a = false, trans_b = false;
  Epilogue epilogue = Epilogue::None;
  bool bias = false, bias_rows = false, accumulate = false, half_c = false, round_c = false;
  uint32_t batch = 1, terms = 1;
};

std::string describe(const Case& c, const MatmulTiling& t, Precision p) {
  return t.name() + " " + ops::precision_name(p) + " " + std::to_string(c.M) + "x" + std::to_string(c.N) + "x" +
         std::to_string(c.K) + (c.trans_a ? " A^T" : "") + (c.trans_b ? " B^T" : "") + " epilogue " +
         std::to_string(int(c.epilogue)) + (c.bias ? c.bias_rows ? " row bias" : " bias" : "") +
         (c.accumulate ? " accumulate" : "") + (c.half_c ? " 16-bit C" : "") + (c.round_c ? " rounded C" : "") +
         " batch " + std::to_string(c.batch) + " terms " + std::to_string(c.terms);
}

MatmulParams params(const Case& c, Precision p) {
  MatmulParams q{.M = c.M, .N = c.N, .K = c.K, .trans_a = c.trans_a, .trans_b = c.trans_b,
                 .accumulate = c.accumulate, .alpha = c.accumulate ? 0.75f : 1.0f, .batch = c.batch,
                 .terms = c.terms, .bias_rows = c.bias_rows};
  q.stride_a = c.M * c.K, q.stride_b = c.K * c.N, q.stride_c = c.M * c.N;
  q.epilogue = c.epilogue;
  if (c.half_c) q.c_format = p;
  if (c.round_c) q.c_round = p;
  if (c.epilogue == Epilogue::Gelu) q.e_format = q.c_format;
  return q;
}

struct Run {
  std::vector<float> c, act;
};

// The product of `c` on A and B (values of precision p), by `tiling` reading them as `format`
// (packed 16 bits, or fp32 holding the same values).
Run run(vk::Device& dev, const Case& c, Precision p, const MatmulTiling& tiling, Precision format, uint32_t seed) {
  const uint64_t products = uint64_t(c.batch) * c.terms, nc = uint64_t(c.M) * c.N * c.batch;
  const auto a = rounded(test::random_vector(products * c.M * c.K, seed, -2, 2), p);
  const auto b = rounded(test::random_vector(products * c.K * c.N, seed + 1, -2, 2), p);
  const auto bias = test::random_vector(c.bias_rows ? c.M : c.N, seed + 2);
  const auto c0 = test::random_vector(nc, seed + 3);
  const auto pre = test::random_vector(nc, seed + 4, -3, 3);
  MatmulParams q = params(c, p);
  q.a_format = q.b_format = format, q.tiling = tiling;
  const bool half = format != Precision::Fp32;
  auto ba = test::to_device(dev, half ? packed(a, p) : a, "A"), bb = test::to_device(dev, half ? packed(b, p) : b, "B");
  auto bbias = test::to_device(dev, bias, "bias"), bpre = test::to_device(dev, pre, "pre");
  const uint64_t c_words = c.half_c ? (nc + 1) / 2 : nc;
  auto bc = c.accumulate ? test::to_device(dev, c0, "C") : test::zeros(dev, c_words, "C");
  auto bact = test::zeros(dev, c_words, "act");
  std::optional<vk::View> epilogue;
  if (c.epilogue == Epilogue::Gelu) epilogue = vk::View(bact);
  if (c.epilogue == Epilogue::GeluGrad) epilogue = vk::View(bpre);
  vk::Commands cmd(dev, "matmul tiles");
  ops::matmul(cmd, ba, bb, bc, q, c.bias ? std::optional<vk::View>(bbias) : std::nullopt, epilogue);
  cmd.run();
  return {test::to_host(bc), test::to_host(bact)};
}

const Case kCases[] = {
    {33, 10, 9, true, false, Epilogue::Relu, true},                                  // edges in M, N and K
    {64, 36, 40, false, true, Epilogue::None, true, false, false, true},             // 16-bit C, several K tiles
    {70, 66, 33, true, true, Epilogue::Gelu, true, false, false, true},              // act beside a 16-bit C
    {20, 24, 17, false, false, Epilogue::GeluGrad, false, false, false, false, true}, // pre read, C rounded
    {9, 14, 70, false, true, Epilogue::None, true, true, true},                      // row bias, alpha, accumulation
    {12, 18, 10, true, false, Epilogue::None, false, false, false, true, false, 3, 2}, // batch of sums
};

void check_against_simt(vk::Device& dev, const MatmulTiling& tiles, Precision p, uint32_t seed,
                        std::span<const Case> cases = kCases) {
  for (const Case& c : cases) {
    const Run want = run(dev, c, p, test::kRegisters, Precision::Fp32, seed);
    const Run got = run(dev, c, p, tiles, p, seed);
    check_bits(got.c, want.c, describe(c, tiles, p) + ": C");
    if (c.epilogue == Epilogue::Gelu) check_bits(got.act, want.act, describe(c, tiles, p) + ": act");
    seed += 7;
  }
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "the matrix-unit kernel on plain invocations stores the SIMT kernel's bits for bf16 and fp16"
                  * doctest::test_suite("not on SwiftShader")) {
  if (test::is_swiftshader(device().info())) {
    MESSAGE("not on this device: SwiftShader has no matrix units (the plain build runs on lavapipe)");
    return;
  }
  // NVIDIA's and AMD's 16x16x16 in warps of 32, and in AMD's default wave of 64 (4 elements a
  // lane), NVIDIA's 16x8x16, Intel's 8x16x16 in warps of 8 and of 16 (Xe2's SIMD16), and warps
  // of 4 (SwiftShader's subgroup) holding 64 accumulators a matrix.
  check_against_simt(device(), ops::emulated_matrix_tiling(16, 16, 16, 32), Precision::Bf16, 3000);
  check_against_simt(device(), ops::emulated_matrix_tiling(16, 16, 16, 64), Precision::Fp16, 3050);
  check_against_simt(device(), ops::emulated_matrix_tiling(16, 8, 16, 32), Precision::Fp16, 3100);
  check_against_simt(device(), ops::emulated_matrix_tiling(8, 16, 16, 8), Precision::Bf16, 3200);
  check_against_simt(device(), ops::emulated_matrix_tiling(8, 16, 16, 16), Precision::Bf16, 3250);
  MatmulTiling narrow = ops::emulated_matrix_tiling(16, 16, 8, 4);
  narrow.tm = 1, narrow.wg_x = 3, narrow.bk = 24;  // one matrix along M, three warps along N
  check_against_simt(device(), narrow, Precision::Fp16, 3300);
  // The larger blocks `bench kernels` tries: 2x4 warps of 4x2 matrices, staged 4 matrices deep.
  MatmulTiling wide = ops::emulated_matrix_tiling(8, 8, 8, 8);
  wide.wg_y = 2, wide.wg_x = 4, wide.tm = 4, wide.tn = 2, wide.bk = 32;
  check_against_simt(device(), wide, Precision::Bf16, 3350);
  // Two copies of the staged tiles, the next K tile staged while this one multiplies.
  MatmulTiling doubled = ops::emulated_matrix_tiling(16, 8, 16, 32);
  doubled.stages = 2;
  check_against_simt(device(), doubled, Precision::Fp16, 3400);
}

// The same on both CI drivers, SwiftShader included (whose compiler is slow over the plain
// build, so one tiling there): warps of 4 lanes, its subgroup's size, 64 accumulators a lane.
TEST_CASE_FIXTURE(test::Gpu, "the matrix-unit kernel's plain build stores the SIMT kernel's bits in warps of 4") {
  MatmulTiling narrow = ops::emulated_matrix_tiling(16, 16, 8, 4);
  narrow.tm = 1, narrow.wg_x = 3, narrow.bk = 24;  // one matrix along M, three warps along N
  check_against_simt(device(), narrow, Precision::Bf16, 3310);
}

// What `bench products` and `bench kernels` try on a GPU listing NVIDIA's two bf16 shapes
// (ops::candidate_tilings: blocks of 2x2 to 4x4 warps, 2x2 to 4x4 matrices a warp, staged 2 or 4
// matrices deep, in one or two copies; 16x8x16 in the default's block), each on plain
// invocations: the same bits as the SIMT kernel, on a product of several blocks each way with
// ragged edges and on the kernel's cases that read A and B untransposed and sum terms. Past this device's shared memory or workgroup, the
// same blocks of warps and matrices in smaller matrices or narrower warps.
TEST_CASE_FIXTURE(test::Gpu, "every matrix-unit tiling tried on a GPU stores the SIMT kernel's bits on plain invocations"
                  * doctest::test_suite("not on SwiftShader")) {
  if (test::is_swiftshader(device().info())) {
    MESSAGE("not on this device: SwiftShader has no matrix units (the plain build runs on lavapipe)");
    return;
  }
  vk::PhysicalInfo gpu = test::synthetic_gpu(vk::MatrixShape::Element::Bf16);
  gpu.matrix_units.shapes.push_back({16, 8, 16, vk::MatrixShape::Element::Bf16});
  gpu.matrix_units.bf16 = true;
  gpu.max_shared_memory = 232448;  // an H200's
  uint32_t tried = 0, shrunk = 0, narrowed = 0, seed = 3500;
  for (const std::optional<MatmulTiling>& t : ops::candidate_tilings(gpu, Precision::Bf16)) {
    if (!t || t->variant != MatmulTiling::Variant::Matrix || t->feed != MatmulTiling::Feed::Staged) continue;
    MatmulTiling plain = *t;
    plain.emulated = true;
    if (plain.shared_bytes() > device().info().max_shared_memory) {
      // Past this device's shared memory (lavapipe's 32 KiB): the same block of warps and
      // matrices, staged as many matrices deep, in 8x8x8 matrices.
      plain.bk = plain.bk / plain.lk * 8;
      plain.lm = plain.ln = plain.lk = 8;
      ++shrunk;
    }
    // A workgroup of subgroups of a required size holds at most 32 of them (lavapipe's
    // maxComputeWorkgroupSubgroups): past that, warps of 8 lanes.
    if (plain.wg_x * plain.wg_y * plain.subgroup > 32 * device().info().subgroup_size) {
      plain.subgroup = 8;
      ++narrowed;
    }
    const uint32_t bm = plain.wg_y * plain.tm * plain.lm, bn = plain.wg_x * plain.tn * plain.ln;
    const Case blocks{bm + 9, 2 * bn - 6, 2 * plain.bk + 8, true, true, Epilogue::Gelu, true, false, false, true};
    const Run want = run(device(), blocks, Precision::Bf16, test::kRegisters, Precision::Fp32, seed);
    const Run got = run(device(), blocks, Precision::Bf16, plain, Precision::Bf16, seed);
    check_bits(got.c, want.c, describe(blocks, plain, Precision::Bf16) + ": C");
    check_bits(got.act, want.act, describe(blocks, plain, Precision::Bf16) + ": act");
    // And A and B read untransposed, into a rounded C after the GELU's gradient, and a batch of
    // sums: each tiling reads both layouts and walks the terms (every pipeline is built anew,
    // which lavapipe takes most of a second for; the other epilogues and the bias by rows run on
    // the tilings of the plain-invocations case above).
    check_against_simt(device(), plain, Precision::Bf16, seed + 1, std::array{kCases[3], kCases[5]});
    seed += 50, ++tried;
  }
  MESSAGE(tried, " tilings, ", shrunk, " of them in 8x8x8 matrices, ", narrowed, " in warps of 8");
  // 16 blocks and the other shape; none in a build without the cooperative-matrix kernels.
  if (vk::has_shader("matmul_tiles_coopmat_bf16")) {
    CHECK(tried >= 17);
  } else {
    CHECK(tried == 0);
    MESSAGE("not in this build: no cooperative-matrix kernels (tools/install-glslang.sh)");
  }
}

// With two K tiles in flight the kernel walks its steps two a pass (each slot of registers a
// constant): every count of steps, odd and even, across terms, ends on the same bits.
TEST_CASE_FIXTURE(test::Gpu, "the matrix-unit kernel with two K tiles in flight stores the SIMT kernel's bits for 1 to 6 steps"
                  * doctest::test_suite("not on SwiftShader")) {
  if (test::is_swiftshader(device().info())) {
    MESSAGE("not on this device: SwiftShader has no matrix units (the plain build runs on lavapipe)");
    return;
  }
  MatmulTiling ahead = ops::emulated_matrix_tiling(8, 8, 8, 8);
  ahead.stages = 2, ahead.ahead = 2;
  uint32_t seed = 4100;
  for (uint32_t terms : {1u, 3u})
    for (uint32_t tiles = 1; tiles * terms <= 6; ++tiles) {
      // 3x2 blocks, the last tile partly past K, and two batches of `terms` sums.
      const Case c{70, 45, ahead.bk * tiles - 3, tiles % 2 == 0, tiles % 3 == 0, Epilogue::None,
                   true, false, false, false, false, 2, terms};
      const Run want = run(device(), c, Precision::Bf16, test::kRegisters, Precision::Fp32, seed);
      const Run got = run(device(), c, Precision::Bf16, ahead, Precision::Bf16, seed);
      check_bits(got.c, want.c, describe(c, ahead, Precision::Bf16) + ": C");
      seed += 10;
    }
}

// The staged kernels may take C's blocks in another order (ops::MatmulTiling::group): each
// block is computed as before, so C holds the same bits, also where the last group of rows of
// blocks is short and over a batch of matrices.
TEST_CASE_FIXTURE(test::Gpu, "the staged kernels taking C's blocks in groups of rows store the bits they store row after row"
                  * doctest::test_suite("not on SwiftShader")) {
  if (test::is_swiftshader(device().info())) {
    MESSAGE("not on this device: SwiftShader has no matrix units (the plain build runs on lavapipe)");
    return;
  }
  const MatmulTiling shared{MatmulTiling::Variant::Shared, 16, 16, 4, 4, 16, 0};  // 64x64 blocks
  const MatmulTiling matrix = ops::emulated_matrix_tiling(8, 8, 8, 8);            // 32x32 blocks
  uint32_t seed = 4300;
  for (const MatmulTiling& t : {shared, matrix}) {
    const bool units = t.variant == MatmulTiling::Variant::Matrix;
    const uint32_t side = units ? 32 : 64;
    // 7 rows of blocks and 5 columns, ragged at both edges; two matrices in the batch.
    const Case c{7 * side - 5, 5 * side - 3, 40, false, true, Epilogue::Relu, true, false, false, false, false, 2, 1};
    const Precision format = units ? Precision::Bf16 : Precision::Fp32;
    const Run rows = run(device(), c, Precision::Bf16, t, format, seed);
    for (uint32_t group : {2u, 3u, 8u}) {
      MatmulTiling grouped = t;
      grouped.group = group;
      const Run got = run(device(), c, Precision::Bf16, grouped, format, seed);
      check_bits(got.c, rows.c, describe(c, grouped, Precision::Bf16) + ": C");
    }
    seed += 10;
  }
}

TEST_CASE_FIXTURE(test::Gpu, "the matrix-unit kernel refuses what it cannot multiply") {
  vk::Device& dev = device();
  auto a = test::zeros(dev, 256, "A"), b = test::zeros(dev, 256, "B"), c = test::zeros(dev, 256, "C");
  vk::Commands cmd(dev, "refusals");
  const MatmulTiling tiles = ops::emulated_matrix_tiling();
  const MatmulParams fp32{.M = 8, .N = 8, .K = 8, .tiling = tiles};
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, c, fp32), doctest::Contains("16-bit A and B of one type"), InternalError);
  MatmulParams mixed = fp32;
  mixed.a_format = Precision::Bf16, mixed.b_format = Precision::Fp16;
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, c, mixed), doctest::Contains("16-bit A and B of one type"), InternalError);
  MatmulParams uneven = fp32;
  uneven.a_format = uneven.b_format = Precision::Bf16;
  uneven.tiling = ops::emulated_matrix_tiling(16, 16, 16, 24);
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, c, uneven), doctest::Contains("evenly"), InternalError);
  MatmulParams single = uneven;
  single.tiling = ops::emulated_matrix_tiling();
  single.tiling->ahead = 2;  // two tiles in flight need two copies of the staged tiles
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, c, single), doctest::Contains("or two with two copies"), InternalError);
  // Matrix units the device does not list are never assumed.
  MatmulParams unlisted = uneven;
  unlisted.tiling = ops::emulated_matrix_tiling(16, 16, 16, 32);
  unlisted.tiling->emulated = false, unlisted.tiling->lk = 40, unlisted.tiling->bk = 80;
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, c, unlisted), doctest::Contains("is not a product"), InternalError);
  // Tiles are staged in rows of 16 bytes, eight elements.
  MatmulParams ragged = uneven;
  ragged.tiling = ops::emulated_matrix_tiling(16, 16, 16, 32);
  ragged.tiling->lk = 7, ragged.tiling->bk = 14;
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, c, ragged), doctest::Contains("multiples of 8"), InternalError);
  // Fragments straight from memory: matrix units only, whole blocks only.
  MatmulParams direct = uneven;
  direct.tiling = ops::emulated_matrix_tiling(8, 8, 8, 8);
  direct.tiling->feed = MatmulTiling::Feed::Direct;
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, c, direct), doctest::Contains("loads matrix units' fragments from memory"), InternalError);
}

TEST_CASE_FIXTURE(test::Gpu, "16-bit products take the matrix units exactly where the device lists their type") {
  vk::Device& dev = device();
  const vk::PhysicalInfo& info = dev.info();
  for (Precision p : {Precision::Fp16, Precision::Bf16}) {
    const auto element = p == Precision::Fp16 ? vk::MatrixShape::Element::Fp16 : vk::MatrixShape::Element::Bf16;
    const bool listed = info.matrix_units.lists(element);
    const std::optional<MatmulTiling> t = ops::matrix_tiling(info, p);
    const std::string path = ops::matrix_path(info, p);
    INFO(info.name, ": ", path);
    CHECK(t.has_value() == (listed && vk::has_shader(std::string("matmul_tiles_coopmat_") + ops::precision_name(p))));
    // By default a CPU's emulated matrix units are left to the SIMT kernel, and plan says so.
    const bool taken = ops::default_matrix_tiling(info, p).has_value();
    CHECK(taken == (t.has_value() && (info.type != VK_PHYSICAL_DEVICE_TYPE_CPU || std::getenv("BRIGADE_MATRIX_UNITS"))));
    CHECK((path.find("products on matrix units") != std::string::npos) == taken);
    if (!t) continue;
    // The cooperative-matrix build: fp32 sums of 16-bit products in the device's order, within
    // fp32 rounding of the SIMT kernel's (1e-4 + 1e-5 relative: K <= 70 products of |x| <= 4).
    // A C (or GELU activation) stored in 16 bits, or rounded to them, is that sum rounded once
    // on each side: one unit in the last place of the format apart at most, 2 u of the value
    // (u = 2^-11 for fp16, 2^-8 for bf16), beside the sums' difference.
    const double u = p == Precision::Fp16 ? 0x1p-11 : 0x1p-8;
    uint32_t seed = 3400;
    const auto check = [&](const Case& c, const MatmulTiling& tiling) {
      const Run got = run(dev, c, p, tiling, p, seed);
      const Run simt = run(dev, c, p, test::kRegisters, Precision::Fp32, seed);
      const auto compare = [&](const std::vector<float>& have, const std::vector<float>& want, const std::string& what) {
        const bool narrow = c.half_c || c.round_c;
        test::check_close(c.half_c ? test::unpacked(have, p, have.size() * 2) : have,
                          c.half_c ? test::unpacked(want, p, want.size() * 2) : want, 1e-4, narrow ? 2 * u : 1e-5,
                          describe(c, tiling, p) + what);
      };
      compare(got.c, simt.c, ": C");
      if (c.epilogue == Epilogue::Gelu) compare(got.act, simt.act, ": act");
      seed += 7;
    };
    for (const Case& c : kCases) check(c, *t);
    // Fed straight from memory (`bench kernels`' measurement of the staging): whole blocks.
    MatmulTiling direct = *t;
    direct.feed = MatmulTiling::Feed::Direct;
    const uint32_t bm = t->wg_y * t->tm * t->lm, bn = t->wg_x * t->tn * t->ln;
    check({2 * bm, bn, 3 * t->lk, true, false, Epilogue::Gelu, true, false, false, true}, direct);
    check({bm, 2 * bn, 2 * t->lk, false, true, Epilogue::None, false, false, true, false, false, 2, 2}, direct);
  }
  CHECK(ops::matrix_path(info, Precision::Fp32).find("SIMT") != std::string::npos);
}

namespace {

// The staged kernels (shared tiles, matrix tiles) on a causal product take the K tiles each
// block of rows needs, whole, and no other: op(A) holds NaN in the tiles a block leaves out, so
// a product that took one would be NaN there, and zeros in what a taken tile holds past the
// diagonal; SkipAbove's blocks wholly above the diagonal compute nothing (C there is the empty
// sum, 0). T across blocks, its last one part.
void check_needed_tiles(vk::Device& dev, const MatmulTiling& t, Precision p = Precision::Bf16) {
  using Causal = MatmulParams::Causal;
  const bool matrix = t.variant == MatmulTiling::Variant::Matrix;
  const uint32_t bm = t.wg_y * t.tm * (matrix ? t.lm : 1), bn = t.wg_x * t.tn * (matrix ? t.ln : 1), bk = t.bk;
  const uint32_t T = 2 * bm + bm / 2 + 1;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  uint32_t seed = 3600;
  for (const Causal causal : {Causal::KToRow, Causal::KFromRow, Causal::SkipAbove}) {
    const bool skip = causal == Causal::SkipAbove;
    MatmulParams q{.M = T, .N = skip ? T : 24, .K = skip ? 16 : T, .trans_a = causal == Causal::KFromRow,
                   .trans_b = skip, .causal = causal, .a_format = p, .b_format = p, .tiling = t};
    std::vector<float> a = rounded(test::random_vector(uint64_t(q.M) * q.K, seed, -1, 1), p), clean = a;
    const std::vector<float> b = rounded(test::random_vector(uint64_t(q.K) * q.N, seed + 1, -1, 1), p);
    if (!skip)
      for (uint32_t m = 0; m < T; ++m) {
        const uint32_t mb = m / bm * bm;
        const uint32_t begin = causal == Causal::KFromRow ? mb / bk * bk : 0,
                       end = causal == Causal::KToRow ? std::min(T, (std::min(T, mb + bm) + bk - 1) / bk * bk) : T;
        for (uint32_t k = 0; k < T; ++k) {
          const uint64_t at = q.trans_a ? uint64_t(k) * T + m : uint64_t(m) * T + k;
          if (causal == Causal::KToRow ? k <= m : k >= m) continue;
          clean[at] = 0.0f;
          a[at] = k < begin || k >= end ? nan : 0.0f;
        }
      }
    auto ba = test::to_device(dev, packed(a, p), "A"), bb = test::to_device(dev, packed(b, p), "B");
    auto bc = test::zeros(dev, uint64_t(q.M) * q.N, "C");
    vk::Commands cmd(dev, "causal tiles");
    ops::matmul(cmd, ba, bb, bc, q);
    cmd.run();
    std::vector<double> want(uint64_t(q.M) * q.N, 0.0);
    ref::matmul<double>(test::to_double(clean), test::to_double(b), want, q);
    if (skip)
      for (uint32_t m = 0; m < T; ++m)
        for (uint32_t n = 0; n < T; ++n)
          if (n / bn * bn > m / bm * bm + bm - 1) want[uint64_t(m) * T + n] = 0.0;
    test::check_close(test::to_host(bc), test::to_float(want), 1e-4, 1e-5,
                      t.name() + " causal " + std::to_string(int(causal)) + " T=" + std::to_string(T));
    seed += 3;
  }
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "the shared tiles take only the K tiles a causal block of rows needs") {
  check_needed_tiles(device(), test::kShared);
  MatmulTiling grouped = test::kShared;
  grouped.group = 2;  // C's blocks in groups of 2 rows, the last group of one
  check_needed_tiles(device(), grouped);
}

// The matrix tiles' half, a case of its own so that SwiftShader's copy leaves it out whole
// (it has no matrix units: test::is_swiftshader) rather than passing a case half run.
TEST_CASE_FIXTURE(test::Gpu, "the matrix tiles take only the K tiles a causal block of rows needs"
                  * doctest::test_suite("not on SwiftShader")) {
  if (test::is_swiftshader(device().info())) {
    MESSAGE("not on this device: SwiftShader has no matrix units (the plain build runs on lavapipe)");
    return;
  }
  check_needed_tiles(device(), ops::emulated_matrix_tiling(16, 8, 16, 32));
  MatmulTiling narrow = ops::emulated_matrix_tiling(8, 8, 8, 8);
  narrow.bk = 24;  // a K depth that divides no block
  check_needed_tiles(device(), narrow);
  narrow.stages = 2;
  check_needed_tiles(device(), narrow);
  narrow.ahead = 2;
  check_needed_tiles(device(), narrow);
  narrow.group = 2;  // C's blocks in groups of 2 rows, the last group of one
  check_needed_tiles(device(), narrow);
  for (Precision p : {Precision::Bf16, Precision::Fp16})
    if (const std::optional<MatmulTiling> t = ops::default_matrix_tiling(device().info(), p)) {
      MESSAGE("on the device's matrix units: ", t->name());
      check_needed_tiles(device(), *t, p);
    }
}

namespace {

// A GPU of these subgroups (the default, the range, whether a pipeline may require one size)
// listing `shapes` of fp16, its matrix units' warps fitted as physical.cpp fits them.
vk::PhysicalInfo gpu_of(uint32_t vendor, uint32_t size, uint32_t min, uint32_t max, bool control,
                        std::vector<vk::MatrixShape> shapes = {}) {
  vk::PhysicalInfo gpu = test::synthetic_gpu(vk::MatrixShape::Element::Fp16);
  gpu.vendor_id = vendor, gpu.subgroup_size = size, gpu.min_subgroup_size = min, gpu.max_subgroup_size = max;
  gpu.subgroup_size_control = control;
  if (!shapes.empty()) gpu.matrix_units.shapes = shapes;
  vk::fit_matrix_units(gpu);
  return gpu;
}

constexpr uint32_t kAmd = 0x1002, kIntel = 0x8086, kNvidia = 0x10de;

}  // namespace

// The matrix-unit kernels' warps are as wide as the device's matrix units run natively, not
// its default subgroup: wave32 on AMD (RDNA3's WMMA; RADV's default compute wave is 64), the
// smallest size its shapes fit on Intel (SIMD8 or SIMD16 DPAS; its default is 32), and the one
// size NVIDIA has; a pipeline requires the width wherever the device offers several.
TEST_CASE("the matrix-unit kernels' warps take each device's matrix width, required where it offers several") {
  const auto fp16 = [](uint32_t m, uint32_t n, uint32_t k) {
    return vk::MatrixShape{m, n, k, vk::MatrixShape::Element::Fp16};
  };
  const auto warps = [](const vk::PhysicalInfo& gpu) {
    return std::pair{gpu.matrix_units.lanes, gpu.matrix_units.required_subgroup_size};
  };
  const vk::PhysicalInfo amd = gpu_of(kAmd, 64, 32, 64, true);
  CHECK(amd.matrix_units.usable());
  CHECK(warps(amd) == std::pair{32u, 32u});
  CHECK(ops::runs_matrix(amd, Precision::Fp16, 16, 16, 16, 32));
  CHECK_FALSE(ops::runs_matrix(amd, Precision::Fp16, 16, 16, 16, 64));
  const vk::PhysicalInfo arc = gpu_of(kIntel, 32, 8, 32, true, {fp16(8, 8, 16)});       // DG2
  const vk::PhysicalInfo xe2 = gpu_of(kIntel, 32, 16, 32, true, {fp16(8, 16, 16)});     // Xe2
  CHECK(warps(arc) == std::pair{8u, 8u});
  CHECK(warps(xe2) == std::pair{16u, 16u});
  // A shape of fewer elements than the smallest subgroup's lanes: the smallest it fits.
  CHECK(warps(gpu_of(kIntel, 32, 8, 32, true, {fp16(8, 8, 16), fp16(2, 4, 16)})) == std::pair{8u, 8u});
  CHECK(warps(gpu_of(kIntel, 32, 16, 32, true, {fp16(2, 4, 16)})) == std::pair{32u, 32u});
  const vk::PhysicalInfo nvidia = gpu_of(kNvidia, 32, 32, 32, true);
  CHECK(nvidia.matrix_units.usable());
  CHECK(warps(nvidia) == std::pair{32u, 0u});  // one size: nothing to require
  // Another vendor offering no 32 (64 to 128): its default, required.
  CHECK(warps(gpu_of(0x5143, 64, 64, 128, true)) == std::pair{64u, 64u});
  // Without subgroup size control: a device of one size runs them in it, one of several cannot.
  CHECK(warps(gpu_of(kNvidia, 32, 32, 32, false)) == std::pair{32u, 0u});
  const vk::PhysicalInfo amd_fixed = gpu_of(kAmd, 64, 32, 64, false);
  CHECK_FALSE(amd_fixed.matrix_units.usable());
  CHECK_FALSE(ops::runs_matrix(amd_fixed, Precision::Fp16, 16, 16, 16, 64));
  // Without full subgroups, none.
  vk::PhysicalInfo partial = gpu_of(kNvidia, 32, 32, 32, true);
  partial.full_subgroups = false;
  vk::fit_matrix_units(partial);
  CHECK_FALSE(partial.matrix_units.usable());
  // The tilings take the width: 2x2 warps of 32 lanes on AMD, of 8 on Arc, for products and attention.
  if (vk::has_shader("matmul_tiles_coopmat_fp16")) {
    const std::optional<MatmulTiling> on_amd = ops::matrix_tiling(amd, Precision::Fp16);
    REQUIRE(on_amd);
    CHECK(on_amd->subgroup == 32);
    CHECK(ops::matrix_tiling(arc, Precision::Fp16)->subgroup == 8);
    const std::optional<ops::AttentionTiling> heads = ops::attention_tiling(amd, Precision::Fp16, 64);
    REQUIRE(heads);
    CHECK(heads->lanes == 32);
  }

  // Listed shapes the kernels cannot use: plan says why rather than "lists no fp16 product".
  vk::PhysicalInfo info;
  info.name = "a GPU";
  info.matrix_units.shapes = {{16, 16, 16, vk::MatrixShape::Element::Fp16}};
  info.matrix_units.vulkan_memory_model = true;
  CHECK_FALSE(info.matrix_units.usable());
  const std::string path = ops::matrix_path(info, Precision::Fp16);
  CHECK(path.find("the device lists fp16 16x16x16, but its compute pipelines can neither require full subgroups") !=
        std::string::npos);
  info.matrix_units.full_subgroups = true;
  CHECK(info.matrix_units.unusable_why().empty());
}

// A product with 256 blocks of 128x128 or more takes them (4x4 matrices a warp, 4 deep); a
// smaller one, or one whose shape is not given, the 2x2 blocks; a device with too little shared
// memory for the large ones keeps the small.
TEST_CASE("16-bit products on matrix units take the large blocks where they have enough of them") {
  vk::PhysicalInfo gpu = test::synthetic_gpu(vk::MatrixShape::Element::Fp16);
  const std::optional<MatmulTiling> small = ops::default_matrix_tiling(gpu, Precision::Fp16);
  if (!small) {  // a build without the cooperative-matrix kernels (tools/install-glslang.sh)
    CHECK_FALSE(vk::has_shader("matmul_tiles_coopmat_fp16"));
    MESSAGE("not in this build: no cooperative-matrix kernels (tools/install-glslang.sh)");
    return;
  }
  CHECK(small->tm == 2);
  CHECK(small->tn == 2);
  const std::optional<MatmulTiling> large = ops::default_matrix_tiling(gpu, Precision::Fp16, 4096, 4096);
  REQUIRE(large);
  CHECK(large->tm == 4);
  CHECK(large->tn == 4);
  CHECK(large->bk == 32);
  CHECK(large->stages == 2);
  CHECK(large->wg_x * large->wg_y == 4);
  CHECK(ops::default_matrix_tiling(gpu, Precision::Fp16, 2048, 2048)->tm == 4);  // 16 x 16 blocks
  CHECK(ops::default_matrix_tiling(gpu, Precision::Fp16, 2048, 1920)->tm == 2);  // 16 x 15
  CHECK(ops::default_matrix_tiling(gpu, Precision::Fp16, 1024, 1024)->tm == 2);
  // The product taking GELU's gradient in its epilogue keeps the small blocks (gpt2-small's MLP
  // input gradient); the forward's GELU takes the large.
  MatmulParams mlp{.M = 16384, .N = 3072, .K = 768, .epilogue = MatmulParams::Epilogue::GeluGrad};
  mlp.a_format = mlp.b_format = Precision::Fp16;
  CHECK(ops::default_tiling(gpu, mlp, true, 0).tm == 2);
  mlp.epilogue = MatmulParams::Epilogue::Gelu;
  CHECK(ops::default_tiling(gpu, mlp, true, 0).tm == 4);
  gpu.max_shared_memory = large->shared_bytes() - 1;
  CHECK(ops::default_matrix_tiling(gpu, Precision::Fp16, 4096, 4096)->tm == 2);
}

}  // namespace kernels_matmul_tiles_test
