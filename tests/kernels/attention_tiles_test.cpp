// Flash attention on matrix tiles (ops/attention_tiles.h) against the matrix form and the CPU
// reference on the same 16-bit qkv: y within the rounding of P and of y itself, lse as fp32
// computes it, the gradient within the rounding of the operands its products read.
// Every tiling runs the tile operations on plain invocations; where the device multiplies
// matrices of the type (Mesa 26's fp16 8x8x8 in tools/coopmat-check.sh), its own tiling runs
// them on its matrix units too.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "check.h"
#include "gpu.h"
#include "grid_cap.h"
#include "half_check.h"
#include "ops/attention.h"
#include "ops/attention_tiles.h"
#include "ref/attention.h"
#include "util/error.h"
#include "vk/commands.h"

namespace kernels_attention_tiles_test {

using namespace brigade;
using ops::AttentionTiling;
using ops::Precision;

namespace {

struct Shape {
  uint32_t B, T, C, NH;
  uint64_t rows() const { return uint64_t(B) * T; }
  std::string name() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C) + " NH=" + std::to_string(NH);
  }
};

// Each P off by u of itself and y by u of itself: y within 2u of the largest value (|y| is at
// most the largest |v|), with u more for the sums' order. The backward reads y as stored and the
// forward's lse; its products read P, dS and dy rounded as the matrix form's do, so the
// gradient is the matrix form's on the same tensors but for the sums' order and a rounding
// those flip (within 4u of the largest value), and the fp32 reference's within the rounding.
// `scratch_cap`: the matrix form's scratch within that many bytes (ops::attention_scratch_within;
// 0: the whole batch's).
void check_tiles(vk::Device& dev, const AttentionTiling& t, const Shape& s, Precision p, uint32_t seed,
                 uint64_t scratch_cap = 0) {
  const std::string what = std::string(ops::precision_name(p)) + " " + s.name() + ", " + t.name();
  const uint64_t nq = s.rows() * 3 * s.C, ny = s.rows() * s.C, stats = s.rows() * s.NH;
  const std::vector<float> qkv = test::rounded(test::random_vector(nq, seed, -2, 2), p);
  const std::vector<float> dy = test::random_vector(ny, seed + 1), dq0 = test::random_vector(nq, seed + 2);
  std::vector<float> want_y(ny), want_lse(stats);
  ref::attention_forward(qkv.data(), want_y.data(), want_lse.data(), s.B, s.T, s.C, s.NH);

  auto hq = test::to_device(dev, test::packed(qkv, p), "qkv, 16 bits"), bdy = test::to_device(dev, dy, "dy");
  auto y = test::zeros(dev, (ny + 1) / 2, "y, 16 bits"), lse = test::zeros(dev, stats, "lse");
  auto dq = test::to_device(dev, dq0, "dqkv"), dq_matrix = test::to_device(dev, dq0, "dqkv, matrix form");
  auto delta = test::zeros(dev, stats, "delta", vk::Category::Scratch);
  const uint64_t scratch_floats = scratch_cap ? ops::attention_scratch_within(s.B, s.T, s.C, s.NH, p, scratch_cap)
                                              : ops::attention_scratch_floats(s.B, s.T, s.C, s.NH, p);
  auto scratch = test::zeros(dev, scratch_floats, "scratch", vk::Category::Scratch);
  auto dq_beside = test::to_device(dev, dq0, "dqkv beside its copy"), copy = test::zeros(dev, (nq + 1) / 2, "dqkv's copy");
  vk::Commands cmd(dev, "attention on matrix tiles");
  ops::attention_tiles_forward(cmd, t, hq, y, lse, s.B, s.T, s.C, s.NH, p);
  ops::attention_tiles_backward(cmd, t, hq, y, lse, bdy, dq, delta, s.B, s.T, s.C, s.NH, p);
  ops::attention_tiles_backward(cmd, t, hq, y, lse, bdy, dq_beside, delta, s.B, s.T, s.C, s.NH, p, vk::View(copy));
  ops::attention_backward(cmd, hq, y, lse, bdy, dq_matrix, scratch, s.B, s.T, s.C, s.NH, ops::Form::Matrix, {p, p});
  cmd.run();

  const double u = p == Precision::Bf16 ? 0x1p-8 : 0x1p-11;
  const std::vector<float> got_y = test::unpacked(test::to_host(y), p, ny), got_lse = test::to_host(lse);
  test::check_close(got_y, want_y, 3 * u * test::max_abs(qkv), 0, what + ": y");
  test::check_close(got_lse, want_lse, 1e-5, 1e-5, what + ": lse");
  CHECK_MESSAGE(got_y != test::rounded(want_y, p), what, ": y read P rounded");

  // The gradients, written over dqkv's starting values (dq0, never read).
  const std::vector<float> got = test::to_host(dq), matrix = test::to_host(dq_matrix);
  std::vector<float> want(nq, 0.0f);
  ref::attention_backward(qkv.data(), got_y.data(), got_lse.data(), dy.data(), want.data(), s.B, s.T, s.C, s.NH);
  test::check_close(got, matrix, 4 * u * test::max_abs(matrix), 0, what + ": dqkv against the matrix form");
  test::check_close(got, want, 8 * u * test::max_abs(want), 0, what + ": dqkv against the reference");
  CHECK_MESSAGE(got != want, what, ": dqkv read dS, P and dy rounded");
  // Written with its copy: the same dqkv, and the copy the host's pack of it.
  test::check_bits(test::to_host(dq_beside), got, what + ": dqkv beside its copy");
  test::check_bits(test::to_host(copy), test::packed(got, p), what + ": dqkv's copy");
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "attention on matrix tiles matches the matrix form and the CPU reference on 16-bit qkv"
                  * doctest::test_suite("not on SwiftShader")) {
  // SwiftShader has no matrix units, so Brigade never runs these kernels there; its compiler
  // takes minutes and gigabytes over the key/value pass's plain build (four products a block).
  if (test::is_swiftshader(device().info())) {
    MESSAGE("not on this device: SwiftShader compiles the key/value pass's plain build for minutes");
    return;
  }
  // T = 37 and 20: part blocks of queries and keys; 16x16x16 in 2 warps of 32, and of 64 (AMD's
  // default wave: lanes past a warp's 16 rows); 8x16x16 in warps of 16 (Intel Xe2's); 8x8x8 in
  // warps of 8, and of 4 (two softmax rows a lane). fp16 shares everything with bf16 but the
  // conversion: one case.
  const Shape wide{2, 37, 32, 2}, narrow{1, 20, 24, 3};
  uint32_t seed = 700;
  check_tiles(device(), ops::emulated_attention_tiling(16, 16, 16, 32, 2), wide, Precision::Bf16, seed++);
  check_tiles(device(), ops::emulated_attention_tiling(16, 16, 16, 64, 2), wide, Precision::Bf16, 790);
  check_tiles(device(), ops::emulated_attention_tiling(8, 16, 16, 16, 2), wide, Precision::Bf16, 791);
  check_tiles(device(), ops::emulated_attention_tiling(8, 8, 8, 8, 2), narrow, Precision::Bf16, seed++);
  check_tiles(device(), ops::emulated_attention_tiling(8, 8, 8, 4, 2), narrow, Precision::Fp16, seed++);
  // Each pass in blocks of its own (BRIGADE_ATTENTION_BLOCKS's per-pass form).
  AttentionTiling own = ops::emulated_attention_tiling(8, 8, 8, 8, 2);
  own.warps = {2, 1, 4}, own.bc = {16, 32, 8};
  check_tiles(device(), own, wide, Precision::Bf16, seed++);
  // The device's matrix units, where it lists a product of the type for these heads.
  for (Precision p : {Precision::Bf16, Precision::Fp16})
    if (const std::optional<AttentionTiling> t = ops::attention_tiling(device().info(), p, wide.C / wide.NH)) {
      MESSAGE("on the device's matrix units: ", t->name());
      check_tiles(device(), *t, wide, p, seed++);
    }
}

TEST_CASE_FIXTURE(test::Gpu, "attention on matrix tiles walks samples past a dispatch's grid, and the 16-bit matrix form one sample's heads"
                  * doctest::test_suite("not on SwiftShader")) {
  if (test::is_swiftshader(device().info())) {
    MESSAGE("not on this device: SwiftShader compiles the key/value pass's plain build for minutes");
    return;
  }
  // 5 samples of 2 heads on a grid of 2 workgroups a dimension (the matrix form beside it in
  // chunks of one sample); then the matrix form's scratch for one head of 3, its packed dy at
  // head offsets.
  {
    const test::GridCap two(2);
    check_tiles(device(), ops::emulated_attention_tiling(8, 8, 8, 8, 2), Shape{5, 20, 32, 2}, Precision::Bf16, 760);
  }
  check_tiles(device(), ops::emulated_attention_tiling(8, 8, 8, 8, 2), Shape{2, 20, 48, 3}, Precision::Fp16, 761, 1);
}

// `bench attention` times the backward's passes apart: recorded one at a time, in two
// submissions, they write the bits they write together.
TEST_CASE_FIXTURE(test::Gpu, "attention on matrix tiles: the backward's passes recorded apart write what they write together"
                  * doctest::test_suite("not on SwiftShader")) {
  if (test::is_swiftshader(device().info())) {
    MESSAGE("not on this device: SwiftShader compiles the key/value pass's plain build for minutes");
    return;
  }
  const Shape s{2, 37, 32, 2};
  const Precision p = Precision::Bf16;
  const AttentionTiling t = ops::emulated_attention_tiling(8, 8, 8, 8, 2);
  vk::Device& dev = device();
  const std::vector<float> qkv = test::rounded(test::random_vector(s.rows() * 3 * s.C, 720, -2, 2), p);
  auto hq = test::to_device(dev, test::packed(qkv, p), "qkv, 16 bits");
  auto bdy = test::to_device(dev, test::random_vector(s.rows() * s.C, 721), "dy");
  auto y = test::zeros(dev, (s.rows() * s.C + 1) / 2, "y"), lse = test::zeros(dev, s.rows() * s.NH, "lse");
  auto together = test::zeros(dev, s.rows() * 3 * s.C, "dqkv"), apart = test::zeros(dev, s.rows() * 3 * s.C, "dqkv apart");
  auto delta = test::zeros(dev, s.rows() * s.NH, "delta", vk::Category::Scratch);
  {
    vk::Commands cmd(dev, "forward, backward");
    ops::attention_tiles_forward(cmd, t, hq, y, lse, s.B, s.T, s.C, s.NH, p);
    ops::attention_tiles_backward(cmd, t, hq, y, lse, bdy, together, delta, s.B, s.T, s.C, s.NH, p);
    cmd.run();
  }
  for (const ops::TilesPass pass : {ops::TilesPass::Query, ops::TilesPass::KeyValue}) {
    vk::Commands cmd(dev, "one pass");
    ops::attention_tiles_backward(cmd, t, hq, y, lse, bdy, apart, delta, s.B, s.T, s.C, s.NH, p, std::nullopt, pass);
    cmd.run();
    if (pass == ops::TilesPass::Query)
      CHECK_MESSAGE(test::to_host(apart) != test::to_host(together), "the queries' pass alone leaves dk and dv");
  }
  test::check_bits(test::to_host(apart), test::to_host(together), "dqkv, its passes apart");
  vk::Commands cmd(dev, "no forward pass in the backward");
  CHECK_THROWS_AS(ops::attention_tiles_backward(cmd, t, hq, y, lse, bdy, apart, delta, s.B, s.T, s.C, s.NH, p,
                                                std::nullopt, ops::TilesPass::Forward),
                  InternalError);
}

TEST_CASE_FIXTURE(test::Gpu, "attention's fused form on 16-bit qkv takes matrix tiles where the device has them, the matrix form elsewhere") {
  // The backward is the matrix form's from the forward's lse and y, as stored: its gradient
  // within the rounding of the matrix form's own.
  const Shape s{2, 24, 32, 2};
  const Precision p = Precision::Fp16;
  const double u = 0x1p-11;
  vk::Device& dev = device();
  const std::vector<float> qkv = test::rounded(test::random_vector(s.rows() * 3 * s.C, 710, -2, 2), p);
  const std::vector<float> dy = test::random_vector(s.rows() * s.C, 711);
  auto hq = test::to_device(dev, test::packed(qkv, p), "qkv, 16 bits"), bdy = test::to_device(dev, dy, "dy");
  const uint64_t words = (s.rows() * s.C + 1) / 2;
  auto y_matrix = test::zeros(dev, words, "y, matrix form"), y_fused = test::zeros(dev, words, "y, fused form");
  auto lse_matrix = test::zeros(dev, s.rows() * s.NH, "lse"), lse_fused = test::zeros(dev, s.rows() * s.NH, "lse");
  auto dq_matrix = test::zeros(dev, s.rows() * 3 * s.C, "dqkv"), dq_fused = test::zeros(dev, s.rows() * 3 * s.C, "dqkv");
  auto scratch = test::zeros(dev, ops::attention_scratch_floats(s.B, s.T, s.C, s.NH, p), "scratch", vk::Category::Scratch);
  vk::Commands cmd(dev, "attention, two forms");
  ops::attention_forward(cmd, hq, y_matrix, lse_matrix, scratch, s.B, s.T, s.C, s.NH, ops::Form::Matrix, {p, p});
  ops::attention_forward(cmd, hq, y_fused, lse_fused, scratch, s.B, s.T, s.C, s.NH, ops::Form::Fused, {p, p});
  ops::attention_backward(cmd, hq, y_matrix, lse_matrix, bdy, dq_matrix, scratch, s.B, s.T, s.C, s.NH, ops::Form::Matrix, {p, p});
  ops::attention_backward(cmd, hq, y_fused, lse_fused, bdy, dq_fused, scratch, s.B, s.T, s.C, s.NH, ops::Form::Fused, {p, p});
  cmd.run();
  const std::vector<float> ym = test::to_host(y_matrix), yf = test::to_host(y_fused);
  if (ops::attention_tiling(dev.info(), p, s.C / s.NH)) {
    const std::vector<float> want = test::unpacked(ym, p, s.rows() * s.C);
    test::check_close(test::unpacked(yf, p, s.rows() * s.C), want, 6 * u * test::max_abs(qkv), 0, "y");
    CHECK_MESSAGE(yf != ym, "the fused form took the matrix tiles");
    const std::vector<float> dm = test::to_host(dq_matrix);
    test::check_close(test::to_host(dq_fused), dm, 16 * u * test::max_abs(dm), 0, "dqkv");
  } else {
    test::check_bits(yf, ym, "y");
    test::check_bits(test::to_host(lse_fused), test::to_host(lse_matrix), "lse");
    test::check_bits(test::to_host(dq_fused), test::to_host(dq_matrix), "dqkv");
  }
}

TEST_CASE_FIXTURE(test::Gpu, "attention's 16-bit backward reads dy packed by its caller and leaves dqkv packed beside it, in either form") {
  // The copies a GPT block's products write and read (ops::PackedGradients): the same dqkv as
  // without them, and dqkv's copy the host's pack of it, whichever kernels the form takes (on
  // matrix tiles their two passes write it). dy's copy is the host's pack, whose bits the
  // attention's own pack gives.
  const Shape s{2, 24, 32, 2};
  const Precision p = Precision::Fp16;  // the type of the matrix units CI runs on
  vk::Device& dev = device();
  const std::vector<float> qkv = test::rounded(test::random_vector(s.rows() * 3 * s.C, 720, -2, 2), p);
  const std::vector<float> dy = test::random_vector(s.rows() * s.C, 721);
  auto hq = test::to_device(dev, test::packed(qkv, p), "qkv, 16 bits"), bdy = test::to_device(dev, dy, "dy");
  auto dy_packed = test::to_device(dev, test::packed(dy, p), "dy, packed by its caller");
  const uint64_t nq = s.rows() * 3 * s.C;
  auto y = test::zeros(dev, (s.rows() * s.C + 1) / 2, "y"), lse = test::zeros(dev, s.rows() * s.NH, "lse");
  auto scratch = test::zeros(dev, ops::attention_scratch_floats(s.B, s.T, s.C, s.NH, p), "scratch", vk::Category::Scratch);
  for (ops::Form form : {ops::Form::Matrix, ops::Form::Fused}) {
    const std::string what = form == ops::Form::Matrix ? "matrix form" : "fused form";
    auto alone = test::zeros(dev, nq, "dqkv alone"), with = test::zeros(dev, nq, "dqkv beside its copy");
    auto copy = test::zeros(dev, (nq + 1) / 2, "dqkv's copy");
    vk::Commands cmd(dev, "attention with packed gradients");
    ops::attention_forward(cmd, hq, y, lse, scratch, s.B, s.T, s.C, s.NH, form, {p, p});
    const uint32_t before = cmd.dispatches();
    ops::attention_backward(cmd, hq, y, lse, bdy, alone, scratch, s.B, s.T, s.C, s.NH, form, {p, p});
    const uint32_t between = cmd.dispatches();
    ops::attention_backward(cmd, hq, y, lse, bdy, with, scratch, s.B, s.T, s.C, s.NH, form, {p, p},
                            {vk::View(dy_packed), vk::View(copy)});
    // The matrix form's products read the caller's dy and write dqkv's copy: no pack of either;
    // flash attention on matrix tiles reads dy in fp32 and writes the copy: no pack either.
    const bool tiles = form == ops::Form::Fused && ops::attention_tiling(dev.info(), p, s.C / s.NH).has_value();
    CHECK(cmd.dispatches() - between == between - before - (tiles ? 0 : 1));
    cmd.run();
    const std::vector<float> want = test::to_host(alone);
    test::check_bits(test::to_host(with), want, what + ": dqkv");
    test::check_bits(test::to_host(copy), test::packed(want, p), what + ": dqkv's copy");
  }
  vk::Commands cmd(dev, "refusal");
  auto small = test::zeros(dev, 16, "small");
  CHECK_THROWS_WITH_AS(ops::attention_backward(cmd, hq, y, lse, bdy, test::zeros(dev, nq, "dqkv"), scratch, s.B, s.T, s.C,
                                               s.NH, ops::Form::Matrix, {p, p}, {std::nullopt, vk::View(small)}),
                       doctest::Contains("attention's packed dqkv"), InternalError);
}

TEST_CASE_FIXTURE(test::Gpu, "attention on matrix tiles refuses heads its tiles do not divide") {
  auto t = test::zeros(device(), 4096, "t");
  vk::Commands cmd(device(), "refusal");
  CHECK_THROWS_WITH_AS(ops::attention_tiles_forward(cmd, ops::emulated_attention_tiling(16, 16, 16, 32, 2), t, t, t,
                                                    1, 4, 24, 2, Precision::Bf16),
                       doctest::Contains("does not fit heads of 12"), InternalError);
  CHECK_THROWS_WITH_AS(ops::attention_tiles_forward(cmd, ops::emulated_attention_tiling(), t, t, t, 1, 4, 32, 2,
                                                    Precision::Fp32),
                       doctest::Contains("16-bit qkv and y"), InternalError);
}

TEST_CASE("flash attention's passes on 16x16x16 matrices fit heads of 64 in 48 KiB: four warps, the keys' pass two") {
  // The backward's sums stay in registers, so in 48 KiB of shared memory its queries' pass fits
  // four warps, 64 query rows a block of keys.
  const ops::AttentionTiling t = ops::emulated_attention_tiling(16, 16, 16, 32, 4);
  CHECK(t.warps_for(64, ops::TilesPass::Forward, 49152) == 4);
  CHECK(t.warps_for(64, ops::TilesPass::Query, 49152) == 4);
  CHECK(t.shared_bytes(64, ops::TilesPass::Query, 4) == 49152);
  CHECK(t.warps_for(64, ops::TilesPass::KeyValue, 49152) == 2);
  CHECK(t.warps_for(64, ops::TilesPass::Query, 49151) == 2);
}

}  // namespace kernels_attention_tiles_test
