// Kernels that read and write 16-bit tensors themselves (shaders/formats.glsl) compute what
// the fp32 kernel computes on the unpacked values, and store what a pack of its fp32 result
// would: the same bits, without the conversion passes around the kernel.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "check.h"
#include "gpu.h"
#include "half_check.h"
#include "ops/activation.h"
#include "ops/conv2d.h"
#include "ops/conv2d_winograd.h"
#include "ops/matmul.h"
#include "ops/matmul_tiles.h"
#include "ops/maxpool2d.h"
#include "shaders/precision.h"
#include "util/error.h"
#include "vk/commands.h"

namespace kernels_half_io_test {

using namespace brigade;
using ops::MatmulParams;
using ops::MatmulTiling;
using ops::Precision;
using test::check_bits, test::packed, test::rounded, test::kRegisters, test::kShared, test::kSubgroupRegisters;

namespace {

struct Case {
  uint32_t M, N, K;
  bool trans_a, trans_b;
};

// op(A) op(B) + bias, ReLU'd, with A and B in `p`: C in `p` (pairs or quads of a row), or C
// in fp32 rounded to `p` (accumulated onto zeros, as a Linear's dx), against the fp32 kernel
// on the same values, rounded and packed on the host. B in `pb`, A's other 16-bit type where
// they differ (a stage's first layer reading the boundary of a stage in the other type).
void check_formats(vk::Device& dev, const MatmulTiling& tiling, const Case& c, Precision p, uint32_t seed,
                   Precision pb = Precision::Fp32) {
  if (pb == Precision::Fp32) pb = p;
  const uint64_t na = uint64_t(c.M) * c.K, nb = uint64_t(c.K) * c.N, nc = uint64_t(c.M) * c.N;
  std::vector<float> a = rounded(test::random_vector(na, seed, -2, 2), p);
  const std::vector<float> b = rounded(test::random_vector(nb, seed + 1, -2, 2), pb);
  const std::vector<float> bias = test::random_vector(c.N, seed + 2);
  a[1] = std::numeric_limits<float>::quiet_NaN();  // a NaN row or column keeps its NaN
  MatmulParams fp32{.M = c.M, .N = c.N, .K = c.K, .trans_a = c.trans_a, .trans_b = c.trans_b,
                    .epilogue = MatmulParams::Epilogue::Relu, .tiling = tiling};
  auto ba = test::to_device(dev, a, "A"), bb = test::to_device(dev, b, "B"), bbias = test::to_device(dev, bias, "bias");
  auto ha = test::to_device(dev, packed(a, p), "A, 16 bits"), hb = test::to_device(dev, packed(b, pb), "B, 16 bits");
  // C in 16 bits where the tiling stores it a word at a time, else in fp32.
  const bool stores = tiling.tn % 2 == 0 && c.N % 2 == 0;
  MatmulParams half = fp32;
  half.a_format = p, half.b_format = pb, half.c_format = stores ? p : Precision::Fp32;
  MatmulParams plain = fp32;
  plain.epilogue = MatmulParams::Epilogue::None, plain.accumulate = true;
  MatmulParams round = plain;
  round.c_round = p;
  auto wide = test::zeros(dev, nc, "C"), direct = test::zeros(dev, stores ? (nc + 1) / 2 : nc, "C from 16 bits");
  auto plain_c = test::zeros(dev, nc, "C accumulated"), round_c = test::zeros(dev, nc, "C accumulated, rounded");
  vk::Commands cmd(dev, "16-bit matmul");
  ops::matmul(cmd, ba, bb, wide, fp32, vk::View(bbias));
  ops::matmul(cmd, ha, hb, direct, half, vk::View(bbias));
  ops::matmul(cmd, ba, bb, plain_c, plain, vk::View(bbias));
  ops::matmul(cmd, ba, bb, round_c, round, vk::View(bbias));
  cmd.run();
  const std::string what = tiling.name() + " " + std::to_string(c.M) + "x" + std::to_string(c.N) + "x" +
                           std::to_string(c.K) + (c.trans_a ? " A^T" : "") + (c.trans_b ? " B^T" : "") + " " +
                           ops::precision_name(p) + (pb != p ? std::string(" B ") + ops::precision_name(pb) : "");
  const std::vector<float> want = test::to_host(wide);
  check_bits(test::to_host(direct), stores ? packed(want, p) : want,
             what + (stores ? ": C stored in 16 bits" : ": 16-bit A and B, fp32 C"));
  check_bits(test::to_host(round_c), rounded(test::to_host(plain_c), p), what + ": C rounded in fp32");
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "matmul on 16-bit A and B, storing C in 16 bits or rounded, gives the fp32 kernel's bits") {
  // Pairs of C (N = 10) and quads (N % 4 == 0), a C it cannot store in 16 bits (N = 13),
  // vec4 and single loads of each operand, K tails; the shared tiles store pairs too. Each
  // tiling and case compiles its own pipelines (slow on SwiftShader): each tiling takes two of
  // the three cases and each case two tilings (the GPU's shared tiles both stores), and fp16,
  // which shares the loads and stores, one tiling.
  const Case pairs{33, 10, 9, true, false}, quads{64, 36, 40, false, true}, odd{5, 13, 8, false, false};
  const std::pair<MatmulTiling, Case> runs[] = {{kSubgroupRegisters, pairs}, {kSubgroupRegisters, odd},
                                                {kRegisters, quads},         {kRegisters, odd},
                                                {kShared, pairs},            {kShared, quads}};
  uint32_t seed = 900;
  for (const auto& [tiling, c] : runs) check_formats(device(), tiling, c, Precision::Bf16, seed += 3);
  for (const Case& c : {Case{9, 6, 16, true, true}, Case{7, 12, 5, false, true}})
    check_formats(device(), kSubgroupRegisters, c, Precision::Fp16, seed += 3);
  // Both types in one dispatch: the build that holds both (ops::format_kernel).
  CHECK(ops::format_kernel("matmul", {Precision::Fp16, Precision::Bf16}) == "matmul_half");
  check_formats(device(), kSubgroupRegisters, pairs, Precision::Fp16, seed += 3, Precision::Bf16);
  check_formats(device(), kRegisters, quads, Precision::Bf16, seed += 3, Precision::Fp16);
}

TEST_CASE_FIXTURE(test::Gpu, "matmul refuses a 16-bit C it cannot store a word at a time") {
  vk::Device& dev = device();
  auto a = test::zeros(dev, 64, "A"), b = test::zeros(dev, 64, "B"), c = test::zeros(dev, 64, "C");
  vk::Commands cmd(dev, "refusals");
  const MatmulParams odd{.M = 4, .N = 5, .K = 4, .c_format = Precision::Bf16, .tiling = kRegisters};
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, c, odd), doctest::Contains("a 16-bit C needs"), InternalError);
  const MatmulParams shared{.M = 4, .N = 7, .K = 4, .c_format = Precision::Bf16, .tiling = kShared};
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, c, shared), doctest::Contains("a 16-bit C needs"), InternalError);
  MatmulParams odd_block = shared;
  odd_block.N = 8, odd_block.tiling = MatmulTiling{MatmulTiling::Variant::Registers, 8, 8, 4, 3, 16, 0};
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, c, odd_block), doctest::Contains("a 16-bit C needs"), InternalError);
  odd_block.tiling = MatmulTiling{MatmulTiling::Variant::Shared, 16, 16, 4, 6, 16, 0};
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, c, odd_block), doctest::Contains("multiples of 4"), InternalError);
  const MatmulParams sums{.M = 4, .N = 8, .K = 4, .accumulate = true, .c_format = Precision::Fp16, .tiling = kRegisters};
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, c, sums), doctest::Contains("no accumulation"), InternalError);
  const MatmulParams both{.M = 4, .N = 8, .K = 4, .c_format = Precision::Bf16, .c_round = Precision::Bf16,
                          .tiling = kRegisters};
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, c, both), doctest::Contains("either rounded"), InternalError);
}

namespace {

// op(A) op(B) on 16-bit A and B into an fp32 C as a gradient's product stores it (`c` holds the
// epilogue, accumulation or rounding), once alone and once writing C's copy in `p` beside it:
// C's bits unchanged, and the copy the host's pack of them.
void check_copy(vk::Device& dev, const MatmulTiling& tiling, MatmulParams q, Precision p, uint32_t seed,
                const std::string& what) {
  const uint64_t na = uint64_t(q.M) * q.K * q.batch, nb = uint64_t(q.K) * q.N * q.batch, nc = uint64_t(q.M) * q.N * q.batch;
  q.stride_a = q.M * q.K, q.stride_b = q.K * q.N, q.stride_c = q.M * q.N;
  q.a_format = q.b_format = p, q.tiling = tiling, q.alpha = q.accumulate ? 0.5f : 1.0f;
  auto ha = test::to_device(dev, packed(rounded(test::random_vector(na, seed, -2, 2), p), p), "A");
  auto hb = test::to_device(dev, packed(rounded(test::random_vector(nb, seed + 1, -2, 2), p), p), "B");
  auto pre = test::to_device(dev, test::random_vector(nc, seed + 2, -3, 3), "pre");
  const std::vector<float> c0 = test::random_vector(nc, seed + 3);
  auto alone = test::to_device(dev, c0, "C alone"), with = test::to_device(dev, c0, "C with its copy");
  auto copy = test::zeros(dev, (nc + 1) / 2, "C's copy");
  const std::optional<vk::View> epilogue =
      q.epilogue == MatmulParams::Epilogue::GeluGrad ? std::optional<vk::View>(pre) : std::nullopt;
  vk::Commands cmd(dev, "matmul with C's copy");
  ops::matmul(cmd, ha, hb, alone, q, std::nullopt, epilogue);
  MatmulParams copying = q;
  copying.copy_format = p;
  ops::matmul(cmd, ha, hb, with, copying, std::nullopt, epilogue, vk::View(copy));
  cmd.run();
  const std::string name = tiling.name() + " " + ops::precision_name(p) + " " + std::to_string(q.M) + "x" +
                           std::to_string(q.N) + "x" + std::to_string(q.K) + " " + what;
  const std::vector<float> want = test::to_host(alone);
  check_bits(test::to_host(with), want, name + ": C beside its copy");
  check_bits(test::to_host(copy), packed(want, p), name + ": C's copy");
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "matmul writes C's 16-bit copy as it stores C: the pack of C's bits, whatever the tiling") {
  // The GELU gradient's product (dfc), an accumulated batch (attention's dQ, dK, dV) and a C
  // rounded in fp32, in quads (N % 4 == 0) and pairs (N = 10), on each kind of kernel.
  using Epilogue = MatmulParams::Epilogue;
  const MatmulParams gelu_grad{.M = 19, .N = 12, .K = 9, .epilogue = Epilogue::GeluGrad};
  const MatmulParams sums{.M = 12, .N = 10, .K = 7, .trans_a = true, .accumulate = true, .batch = 3};
  const MatmulParams round{.M = 9, .N = 16, .K = 20, .trans_b = true, .c_round = Precision::Bf16};
  uint32_t seed = 1300;
  for (const MatmulTiling& t : {kSubgroupRegisters, kShared, ops::emulated_matrix_tiling(16, 8, 16, 32)}) {
    if (t.variant == MatmulTiling::Variant::Matrix && test::is_swiftshader(device().info())) continue;
    check_copy(device(), t, gelu_grad, Precision::Bf16, seed += 5, "GELU gradient");
    check_copy(device(), t, sums, Precision::Bf16, seed += 5, "accumulated batch");
  }
  check_copy(device(), kRegisters, round, Precision::Bf16, seed += 5, "C rounded");
  check_copy(device(), kRegisters, gelu_grad, Precision::Fp16, seed += 5, "GELU gradient");
  // The device's own matrix units, where it multiplies the type.
  for (Precision p : {Precision::Bf16, Precision::Fp16})
    if (const std::optional<MatmulTiling> t = ops::default_matrix_tiling(device().info(), p)) {
      MESSAGE("on the device's matrix units: ", t->name());
      check_copy(device(), *t, gelu_grad, p, seed += 5, "GELU gradient");
      check_copy(device(), *t, sums, p, seed += 5, "accumulated batch");
    }
}

TEST_CASE_FIXTURE(test::Gpu, "matmul refuses a copy of C it cannot write") {
  vk::Device& dev = device();
  auto a = test::zeros(dev, 64, "A"), b = test::zeros(dev, 64, "B"), c = test::zeros(dev, 64, "C");
  auto copy = test::zeros(dev, 32, "copy");
  vk::Commands cmd(dev, "refusals");
  const MatmulParams odd{.M = 4, .N = 5, .K = 4, .copy_format = Precision::Bf16, .tiling = kRegisters};
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, c, odd, std::nullopt, std::nullopt, vk::View(copy)),
                       doctest::Contains("C's 16-bit copy needs"), InternalError);
  const MatmulParams half_c{.M = 4, .N = 8, .K = 4, .c_format = Precision::Bf16, .copy_format = Precision::Bf16,
                            .tiling = kRegisters};
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, c, half_c, std::nullopt, std::nullopt, vk::View(copy)),
                       doctest::Contains("of an fp32 C"), InternalError);
  const MatmulParams no_view{.M = 4, .N = 8, .K = 4, .copy_format = Precision::Bf16, .tiling = kRegisters};
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, c, no_view), doctest::Contains("come together"), InternalError);
  const MatmulParams small{.M = 8, .N = 16, .K = 4, .copy_format = Precision::Bf16, .tiling = kRegisters};
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, a, b, test::zeros(dev, 128, "C"), small, std::nullopt, std::nullopt,
                                   vk::View(copy)),
                       doctest::Contains("C's copy"), InternalError);
}

TEST_CASE_FIXTURE(test::Gpu, "relu_backward reads a 16-bit y as the fp32 kernel reads its unpacked values") {
  for (Precision p : {Precision::Bf16, Precision::Fp16})
    for (uint32_t n : {1u, 7u, 64u, 1001u}) {
      std::vector<float> y = rounded(test::random_vector(n, n), p);
      y[0] = 0.0f;  // the boundary: not positive
      const std::vector<float> dy = test::random_vector(n, n + 1);
      auto by = test::to_device(device(), y, "y"), hy = test::to_device(device(), packed(y, p), "y, 16 bits");
      auto bdy = test::to_device(device(), dy, "dy");
      auto want = test::to_device(device(), test::random_vector(n, 3), "dx");
      auto got = test::to_device(device(), test::random_vector(n, 4), "dx from 16 bits");
      vk::Commands cmd(device(), "relu backward");
      ops::relu_backward(cmd, by, bdy, want, n);
      ops::relu_backward(cmd, hy, bdy, got, n, p);
      cmd.run();
      check_bits(test::to_host(got), test::to_host(want), std::string(ops::precision_name(p)) + " n=" + std::to_string(n));
    }
}

TEST_CASE_FIXTURE(test::Gpu, "conv2d in its matrix and Winograd forms reads and writes 16 bits as the fp32 kernels on the values") {
  // 36 output pixels: y stored in 16 bits; 25: an odd count, y in fp32 from a 16-bit x; 20
  // pixels five wide: y in 16 bits in the matrix form, in fp32 in Winograd's, which stores
  // two of a row at a time (its forms: those of 3x3 at stride 1); 7x8: Winograd's 4x4 tiles
  // (tile_for), the last row of tiles cut short.
  const ops::Conv2dShape shapes[] = {{3, 2, 6, 6, 4, 3, 3, 1, 1, 1, 1}, {2, 3, 5, 5, 6, 3, 3, 1, 1, 1, 1},
                                     {2, 4, 9, 8, 4, 3, 2, 2, 2, 0, 1}, {2, 2, 4, 5, 3, 3, 3, 1, 1, 1, 1},
                                     {2, 2, 7, 8, 3, 3, 3, 1, 1, 1, 1}};
  uint32_t seed = 50;
  for (Precision p : {Precision::Bf16, Precision::Fp16})
    for (const ops::Conv2dShape& s : shapes)
      for (ops::Form form : {ops::Form::Matrix, ops::Form::Winograd}) {
        if (form == ops::Form::Winograd && !ops::winograd::fits(s)) continue;
        // Where the matrix form's products take the device's matrix units they read the weight
        // and dy rounded, not the fp32 kernels' values: the next test checks those.
        if (form == ops::Form::Matrix && ops::default_matrix_tiling(device().info(), p) &&
            s.out_h() * s.out_w() % 4 == 0)
          continue;
        const bool half_y = form == ops::Form::Winograd ? s.out_w() % 2 == 0 : s.out_h() * s.out_w() % 2 == 0;
        const std::string what = std::string(ops::precision_name(p)) + " " + std::to_string(s.h) + "x" +
                                 std::to_string(s.w) + " to " + std::to_string(s.out_h()) + "x" + std::to_string(s.out_w()) +
                                 (form == ops::Form::Winograd ? " winograd" : " matrix");
        const ops::Formats f{p, half_y ? p : Precision::Fp32};
        const std::vector<float> x = rounded(test::random_vector(s.x_size(), seed += 4), p);
        const std::vector<float> w = test::random_vector(s.weight_size(), seed + 1);
        const std::vector<float> bias = test::random_vector(s.oc, seed + 2), dy = test::random_vector(s.y_size(), seed + 3);
        auto bx = test::to_device(device(), x, "x"), hx = test::to_device(device(), packed(x, p), "x, 16 bits");
        auto bw = test::to_device(device(), w, "weight"), bb = test::to_device(device(), bias, "bias");
        auto bdy = test::to_device(device(), dy, "dy");
        auto y = test::zeros(device(), s.y_size(), "y"), hy = test::zeros(device(), s.y_size(), "y from 16 bits");
        auto dx = test::zeros(device(), s.x_size(), "dx"), rdx = test::zeros(device(), s.x_size(), "dx, rounded");
        auto dw = test::zeros(device(), s.weight_size(), "dweight"), hdw = test::zeros(device(), s.weight_size(), "dweight");
        const uint64_t scratch = std::max(ops::conv2d_scratch_floats(s, s.n),
                                          ops::winograd::fits(s) ? ops::winograd::scratch_floats(s, s.n) : 0);
        auto columns = test::zeros(device(), scratch, "scratch", vk::Category::Scratch);
        vk::Commands cmd(device(), "conv2d 16 bits");
        ops::conv2d_forward(cmd, bx, bw, vk::View(bb), y, s, columns, form);
        ops::conv2d_forward(cmd, hx, bw, vk::View(bb), hy, s, columns, form, f);
        ops::conv2d_backward_data(cmd, bdy, bw, dx, s, columns, form);
        ops::conv2d_backward_data(cmd, bdy, bw, rdx, s, columns, form, f);
        ops::conv2d_backward_weight(cmd, bdy, bx, dw, std::nullopt, s, columns, form);
        ops::conv2d_backward_weight(cmd, bdy, hx, hdw, std::nullopt, s, columns, form, f);
        cmd.run();
        const std::vector<float> want = test::to_host(y);
        if (is_half(f.y)) {
          std::vector<float> got = test::to_host(hy);
          got.resize((want.size() + 1) / 2);
          check_bits(got, packed(want, p), what + ": y");
        } else {
          check_bits(test::to_host(hy), want, what + ": y");
        }
        check_bits(test::to_host(rdx), rounded(test::to_host(dx), p), what + ": dx");
        check_bits(test::to_host(hdw), test::to_host(dw), what + ": dweight");
        // The layer takes 16 bits where its device's form is the matrix one (SwiftShader's is not);
        // these shapes have too few channels for Winograd's to pay.
        if (form == ops::Form::Matrix)
          CHECK_MESSAGE(ops::conv2d_stores_half(device().info(), s) ==
                            (is_half(f.y) && ops::form_for(device().info()) == ops::Form::Matrix),
                        what, ": conv2d_stores_half");
        else if (!is_half(f.y))
          CHECK_THROWS_WITH(ops::conv2d_forward(cmd, hx, bw, vk::View(bb), hy, s, columns, form, {p, p}),
                            doctest::Contains("16-bit output of even width"));
      }
  // Where Winograd's form pays (16 input channels), the layer stores 16 bits for an even width.
  const bool matrix = ops::form_for(device().info()) == ops::Form::Matrix;
  CHECK(ops::conv2d_stores_half(device().info(), {1, 16, 4, 6, 8, 3, 3, 1, 1, 1, 1}) == matrix);
  CHECK_FALSE(ops::conv2d_stores_half(device().info(), {1, 16, 4, 5, 8, 3, 3, 1, 1, 1, 1}));
}

// On a 16-bit x, the matrix form's three products read 16-bit operands where the device
// multiplies matrices of that type (a GPU's matrix units; Mesa 26's lavapipe with
// BRIGADE_MATRIX_UNITS=on, tools/coopmat-check.sh): the columns, the weight rounded and, in
// the backward, dy rounded. Their results are then the fp32 kernels' on those rounded values,
// to fp32's rounding (the matrix units sum in their own order), and differ from the fp32
// products on the unrounded weight and dy. Elsewhere, and where im2col cannot store the
// columns a quad at a time (OH*OW % 4 != 0), the products are those fp32 ones, bit for bit.
TEST_CASE_FIXTURE(test::Gpu, "conv2d's matrix form on a 16-bit x takes the matrix units where the device has them") {
  // A 1x1 convolution, a 5x5 one, a strided 3x3 one, and one of 25 output pixels.
  const ops::Conv2dShape shapes[] = {{2, 8, 6, 6, 12, 1, 1, 1, 1, 0, 0}, {2, 3, 8, 8, 8, 5, 5, 1, 1, 2, 2},
                                     {3, 4, 8, 8, 6, 3, 3, 2, 2, 1, 1}, {2, 3, 5, 5, 4, 3, 3, 1, 1, 1, 1}};
  uint32_t seed = 1700;
  for (Precision p : {Precision::Bf16, Precision::Fp16})
    for (const ops::Conv2dShape& s : shapes) {
      const bool units = ops::default_matrix_tiling(device().info(), p).has_value() && s.out_h() * s.out_w() % 4 == 0;
      const std::string what = std::string(ops::precision_name(p)) + " " + std::to_string(s.kh) + "x" +
                               std::to_string(s.kw) + " to " + std::to_string(s.out_h()) + "x" +
                               std::to_string(s.out_w()) + (units ? ", matrix units" : ", fp32 products");
      const std::vector<float> x = rounded(test::random_vector(s.x_size(), seed += 4), p);
      const std::vector<float> w = test::random_vector(s.weight_size(), seed + 1);
      const std::vector<float> dy = test::random_vector(s.y_size(), seed + 2);
      vk::Device& dev = device();
      auto bx = test::to_device(dev, x, "x"), hx = test::to_device(dev, packed(x, p), "x, 16 bits");
      auto bw = test::to_device(dev, w, "weight"), rw = test::to_device(dev, rounded(w, p), "weight, rounded");
      auto bdy = test::to_device(dev, dy, "dy"), rdy = test::to_device(dev, rounded(dy, p), "dy, rounded");
      // got: the 16-bit x's passes; plain: fp32 products on w and dy; want: on them rounded.
      struct Run {
        vk::Buffer y, dx, dw;
      };
      auto run = [&](const char* name) {
        return Run{test::zeros(dev, s.y_size(), std::string("y ") + name), test::zeros(dev, s.x_size(), "dx"),
                   test::zeros(dev, s.weight_size(), "dweight")};
      };
      Run got = run("16 bits"), plain = run("fp32"), want = run("rounded");
      auto scratch = test::zeros(dev, ops::conv2d_scratch_floats(s, s.n, p), "scratch", vk::Category::Scratch);
      const ops::Formats f{p, Precision::Fp32};
      const ops::Form m = ops::Form::Matrix;
      vk::Commands cmd(dev, "conv2d on 16-bit products");
      ops::conv2d_forward(cmd, hx, bw, std::nullopt, got.y, s, scratch, m, f);
      ops::conv2d_backward_data(cmd, bdy, bw, got.dx, s, scratch, m, f);
      ops::conv2d_backward_weight(cmd, bdy, hx, got.dw, std::nullopt, s, scratch, m, f);
      for (auto [r, wv, dv] : {std::tuple{&plain, &bw, &bdy}, std::tuple{&want, &rw, &rdy}}) {
        ops::conv2d_forward(cmd, bx, *wv, std::nullopt, r->y, s, scratch, m);
        ops::conv2d_backward_data(cmd, *dv, *wv, r->dx, s, scratch, m);
        ops::conv2d_backward_weight(cmd, *dv, bx, r->dw, std::nullopt, s, scratch, m);
      }
      cmd.run();
      const std::vector<float> gy = test::to_host(got.y), gdx = test::to_host(got.dx), gdw = test::to_host(got.dw);
      if (!units) {
        check_bits(gy, test::to_host(plain.y), what + ": y");
        check_bits(gdx, rounded(test::to_host(plain.dx), p), what + ": dx");
        check_bits(gdw, test::to_host(plain.dw), what + ": dweight");
        continue;
      }
      const std::vector<float> wy = test::to_host(want.y), wdx = rounded(test::to_host(want.dx), p), wdw = test::to_host(want.dw);
      const double u = p == Precision::Bf16 ? 0x1p-8 : 0x1p-11;  // dx is rounded after the sum
      test::check_close(gy, wy, 1e-5 * test::max_abs(wy), 1e-5, what + ": y");
      test::check_close(gdx, wdx, 2 * u * test::max_abs(wdx), 2 * u, what + ": dx");
      test::check_close(gdw, wdw, 1e-5 * test::max_abs(wdw), 1e-5, what + ": dweight");
      CHECK_MESSAGE(gy != test::to_host(plain.y), what, ": y read the weight rounded");
      CHECK_MESSAGE(gdw != test::to_host(plain.dw), what, ": dweight read dy rounded");
    }
}

TEST_CASE_FIXTURE(test::Gpu, "maxpool2d reads and writes 16 bits as the fp32 kernels on the values") {
  // 2x2 windows read as pairs (even planes; 7x7 outputs: an odd count per plane) or, two
  // windows an invocation, as quads (rows of 12 and 28); 3x3 windows at stride 2 (overlapping,
  // gathered), ReLU folded in or not.
  const ops::MaxPool2dShape shapes[] = {{2, 3, 14, 14, 2, 2, false}, {3, 1, 14, 14, 2, 2, true},
                                        {3, 1, 10, 12, 2, 2, true}, {1, 2, 28, 28, 2, 2, false},
                                        {2, 3, 9, 7, 3, 2, false}, {1, 3, 5, 5, 2, 2, true}};
  uint32_t seed = 70;
  for (Precision p : {Precision::Bf16, Precision::Fp16})
    for (const ops::MaxPool2dShape& s : shapes) {
      const std::string what = std::string(ops::precision_name(p)) + " " + std::to_string(s.h) + "x" +
                               std::to_string(s.w) + " window " + std::to_string(s.k) + (s.relu ? " relu" : "");
      std::vector<float> x = rounded(test::random_vector(s.x_size(), seed += 3), p);
      x[4] = x[5];  // a tie
      const std::vector<float> dy = test::random_vector(s.y_size(), seed + 1);
      auto bx = test::to_device(device(), x, "x"), hx = test::to_device(device(), packed(x, p), "x, 16 bits");
      auto bdy = test::to_device(device(), dy, "dy");
      auto y = test::zeros(device(), s.y_size(), "y"), hy = test::zeros(device(), (s.y_size() + 1) / 2, "y, 16 bits");
      auto dx = test::zeros(device(), s.x_size(), "dx"), rdx = test::zeros(device(), s.x_size(), "dx, rounded");
      vk::Commands cmd(device(), "maxpool2d 16 bits");
      ops::maxpool2d_forward(cmd, bx, y, s);
      ops::maxpool2d_forward(cmd, hx, hy, s, {p, p});
      ops::maxpool2d_backward_data(cmd, bx, bdy, dx, s);
      ops::maxpool2d_backward_data(cmd, hx, bdy, rdx, s, {p, p});
      cmd.run();
      check_bits(test::to_host(hy), packed(test::to_host(y), p), what + ": y");
      check_bits(test::to_host(rdx), rounded(test::to_host(dx), p), what + ": dx");
    }
}

}  // namespace kernels_half_io_test
