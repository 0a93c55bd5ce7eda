// Flash attention's forward on matrix tiles (ops/attention_tiles.h) against the CPU reference
// on the same 16-bit qkv: y within the rounding of P and of y itself, lse as fp32 computes it.
// Every tiling runs the tile operations on plain invocations; where the device multiplies
// matrices of the type (Mesa 26's fp16 8x8x8 in tools/coopmat-check.sh), its own tiling runs
// them on its matrix units too.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "check.h"
#include "gpu.h"
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

struct Forward {
  std::vector<float> y, lse;
};

// The kernel's y (unpacked) and lse on qkv, whose values are the type's.
Forward tiles_forward(vk::Device& dev, const AttentionTiling& t, const std::vector<float>& qkv, const Shape& s,
                      Precision p) {
  auto bq = test::to_device(dev, test::packed(qkv, p), "qkv, 16 bits");
  auto y = test::zeros(dev, (s.rows() * s.C + 1) / 2, "y, 16 bits"), lse = test::zeros(dev, s.rows() * s.NH, "lse");
  vk::Commands cmd(dev, "attention on matrix tiles");
  ops::attention_tiles_forward(cmd, t, bq, y, lse, s.B, s.T, s.C, s.NH, p);
  cmd.run();
  return {test::unpacked(test::to_host(y), p, s.rows() * s.C), test::to_host(lse)};
}

// Each P off by u of itself and y by u of itself: within 2u of the largest value (|y| is at most
// the largest |v|), with u more for the sums' order.
void check_forward(vk::Device& dev, const AttentionTiling& t, const Shape& s, Precision p, uint32_t seed) {
  const std::string what = std::string(ops::precision_name(p)) + " " + s.name() + ", " + t.name();
  const std::vector<float> qkv = test::rounded(test::random_vector(s.rows() * 3 * s.C, seed, -2, 2), p);
  std::vector<float> want_y(s.rows() * s.C), want_lse(s.rows() * s.NH);
  ref::attention_forward(qkv.data(), want_y.data(), want_lse.data(), s.B, s.T, s.C, s.NH);
  const Forward got = tiles_forward(dev, t, qkv, s, p);
  const double u = p == Precision::Bf16 ? 0x1p-8 : 0x1p-11;
  test::check_close(got.y, want_y, 3 * u * test::max_abs(qkv), 0, what + ": y");
  test::check_close(got.lse, want_lse, 1e-5, 1e-5, what + ": lse");
  CHECK_MESSAGE(got.y != test::rounded(want_y, p), what, ": y read P rounded");
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "attention's forward on matrix tiles matches the CPU reference on 16-bit qkv") {
  // T = 37 and 20: part blocks of queries and keys; 16x16x16 in 2 warps of 32; 8x8x8 in warps of
  // 8, and of 4 (two softmax rows a lane). fp16 shares everything with bf16 but the conversion:
  // one case.
  const Shape wide{2, 37, 32, 2}, narrow{1, 20, 24, 3};
  uint32_t seed = 700;
  check_forward(device(), ops::emulated_attention_tiling(16, 16, 16, 32, 2), wide, Precision::Bf16, seed++);
  check_forward(device(), ops::emulated_attention_tiling(8, 8, 8, 8, 2), narrow, Precision::Bf16, seed++);
  check_forward(device(), ops::emulated_attention_tiling(8, 8, 8, 4, 2), narrow, Precision::Fp16, seed++);
  // The device's matrix units, where it lists a product of the type for these heads.
  for (Precision p : {Precision::Bf16, Precision::Fp16})
    if (const std::optional<AttentionTiling> t = ops::attention_tiling(device().info(), p, wide.C / wide.NH)) {
      MESSAGE("on the device's matrix units: ", t->name());
      check_forward(device(), *t, wide, p, seed++);
    }
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

}  // namespace kernels_attention_tiles_test
