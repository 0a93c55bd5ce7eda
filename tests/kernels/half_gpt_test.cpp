// The GPT block's kernels that read and write 16-bit tensors themselves (LayerNorm, the
// residual add, the products' GELU epilogues, attention) compute what the fp32 kernels compute
// on the unpacked values, and store what a pack of their fp32 results would: the same bits.
#include <doctest/doctest.h>

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "check.h"
#include "gpu.h"
#include "half_check.h"
#include "ops/activation.h"
#include "ops/attention.h"
#include "ops/layernorm.h"
#include "ops/matmul.h"
#include "ops/matmul_tiles.h"
#include "ops/residual.h"
#include "util/error.h"
#include "vk/commands.h"

namespace kernels_half_gpt_test {

using namespace brigade;
using ops::MatmulParams;
using ops::MatmulTiling;
using ops::Precision;
using test::check_bits, test::packed, test::rounded;

namespace {

std::string name_of(Precision p) { return ops::precision_name(p); }

// The first n words of a downloaded 16-bit tensor of `elements` values.
std::vector<float> words(const vk::Buffer& b, uint64_t elements) {
  std::vector<float> w = test::to_host(b);
  w.resize((elements + 1) / 2);
  return w;
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "layernorm reads and writes 16 bits as the fp32 kernels on the values") {
  // C = 128 and 12: lanes that keep several quads of a row, and one; 5 rows: a part workgroup.
  uint32_t seed = 300;
  for (Precision p : {Precision::Bf16, Precision::Fp16})
    for (const auto& [N, C] : {std::pair{5u, 12u}, std::pair{3u, 128u}}) {
      const std::string what = name_of(p) + " " + std::to_string(N) + "x" + std::to_string(C);
      const uint64_t n = uint64_t(N) * C;
      const std::vector<float> x = rounded(test::random_vector(n, seed += 7, -3, 3), p);
      const std::vector<float> w = test::random_vector(C, seed + 1), b = test::random_vector(C, seed + 2);
      const std::vector<float> dy = test::random_vector(n, seed + 3), dx0 = test::random_vector(n, seed + 4);
      vk::Device& dev = device();
      auto bx = test::to_device(dev, x, "x"), hx = test::to_device(dev, packed(x, p), "x, 16 bits");
      auto bw = test::to_device(dev, w, "weight"), bb = test::to_device(dev, b, "bias");
      auto bdy = test::to_device(dev, dy, "dy");
      auto y = test::zeros(dev, n, "y"), hy = test::zeros(dev, n, "y, 16 bits");
      auto mean = test::zeros(dev, N, "mean"), rstd = test::zeros(dev, N, "rstd");
      auto hmean = test::zeros(dev, N, "mean from 16 bits"), hrstd = test::zeros(dev, N, "rstd from 16 bits");
      auto dx = test::to_device(dev, dx0, "dx"), rdx = test::to_device(dev, dx0, "dx, rounded");
      auto wdx = test::to_device(dev, dx0, "dx from 16 bits, fp32");
      auto cdx = test::to_device(dev, dx0, "dx beside its copy"), copy = test::zeros(dev, (n + 1) / 2, "dx's copy");
      // dx = residual + the gradient: what dx held is never read.
      auto residual = test::to_device(dev, dx0, "residual gradient");
      auto sdx = test::to_device(dev, test::random_vector(n, seed + 5), "dx from a residual"),
           hsdx = test::to_device(dev, test::random_vector(n, seed + 6), "dx from a residual, 16-bit x");
      auto dw = test::zeros(dev, C, "dweight"), db = test::zeros(dev, C, "dbias");
      auto hdw = test::zeros(dev, C, "dweight from 16 bits"), hdb = test::zeros(dev, C, "dbias from 16 bits");
      vk::Commands cmd(dev, "layernorm 16 bits");
      ops::layernorm_forward(cmd, bx, bw, bb, y, mean, rstd, N, C);
      ops::layernorm_forward(cmd, hx, bw, bb, hy, hmean, hrstd, N, C, 1e-5f, {p, p});
      ops::layernorm_backward_data(cmd, bdy, bx, bw, mean, rstd, dx, N, C);
      ops::layernorm_backward_data(cmd, bdy, hx, bw, mean, rstd, rdx, N, C, p, p);
      ops::layernorm_backward_data(cmd, bdy, hx, bw, mean, rstd, wdx, N, C, p);
      ops::layernorm_backward_data(cmd, bdy, hx, bw, mean, rstd, cdx, N, C, p, Precision::Fp32, {.copy = vk::View(copy), .copy_format = p});
      ops::layernorm_backward_data(cmd, bdy, bx, bw, mean, rstd, sdx, N, C, Precision::Fp32, Precision::Fp32,
                                   {.residual = vk::View(residual)});
      ops::layernorm_backward_data(cmd, bdy, hx, bw, mean, rstd, hsdx, N, C, p, Precision::Fp32, {.residual = vk::View(residual)});
      ops::layernorm_backward_weight(cmd, bdy, bx, mean, rstd, dw, db, N, C);
      ops::layernorm_backward_weight(cmd, bdy, hx, mean, rstd, hdw, hdb, N, C, 0, p);
      cmd.run();
      check_bits(words(hy, n), packed(test::to_host(y), p), what + ": y");
      check_bits(test::to_host(hmean), test::to_host(mean), what + ": mean");
      check_bits(test::to_host(hrstd), test::to_host(rstd), what + ": rstd");
      check_bits(test::to_host(rdx), rounded(test::to_host(dx), p), what + ": dx rounded");
      check_bits(test::to_host(wdx), test::to_host(dx), what + ": dx in fp32");
      check_bits(test::to_host(cdx), test::to_host(dx), what + ": dx beside its copy");
      check_bits(test::to_host(sdx), test::to_host(dx), what + ": dx from a residual");
      check_bits(test::to_host(hsdx), test::to_host(dx), what + ": dx from a residual, 16-bit x");
      check_bits(words(copy, n), packed(test::to_host(dx), p), what + ": dx's copy, packed as it was written");
      check_bits(test::to_host(hdw), test::to_host(dw), what + ": dweight");
      check_bits(test::to_host(hdb), test::to_host(db), what + ": dbias");
    }
  // 16 bits go a quad at a time: a row of 6 cannot.
  auto t = test::zeros(device(), 64, "t"), s = test::zeros(device(), 8, "s");
  vk::Commands cmd(device(), "refusal");
  CHECK_THROWS_WITH_AS(ops::layernorm_forward(cmd, t, s, s, t, s, s, 2, 6, 1e-5f, {Precision::Bf16, Precision::Bf16}),
                       doctest::Contains("C % 4 == 0"), InternalError);
  CHECK_THROWS_WITH_AS(ops::layernorm_backward_data(cmd, t, t, s, s, s, t, 2, 6, Precision::Fp32, Precision::Fp32,
                                                    {.copy = vk::View(t), .copy_format = Precision::Bf16}),
                       doctest::Contains("C % 4 == 0"), InternalError);
}

TEST_CASE_FIXTURE(test::Gpu, "residual_forward reads a 16-bit a and stores a 16-bit y as the fp32 kernel") {
  for (Precision p : {Precision::Bf16, Precision::Fp16})
    for (uint32_t n : {4u, 1000u}) {
      const std::string what = name_of(p) + " n=" + std::to_string(n);
      const std::vector<float> a = rounded(test::random_vector(n, n + 1, -4, 4), p), b = test::random_vector(n, n + 2);
      auto ba = test::to_device(device(), a, "a"), ha = test::to_device(device(), packed(a, p), "a, 16 bits");
      auto bb = test::to_device(device(), b, "b");
      auto y = test::zeros(device(), n, "y"), hy = test::zeros(device(), n, "y, 16 bits"), wy = test::zeros(device(), n, "y");
      vk::Commands cmd(device(), "residual 16 bits");
      ops::residual_forward(cmd, ba, bb, y, n);
      ops::residual_forward(cmd, ha, bb, hy, n, {p, p});
      ops::residual_forward(cmd, ha, bb, wy, n, {p, Precision::Fp32});
      cmd.run();
      check_bits(words(hy, n), packed(test::to_host(y), p), what + ": y in 16 bits");
      check_bits(test::to_host(wy), test::to_host(y), what + ": y in fp32");
    }
  auto t = test::zeros(device(), 8, "t");
  vk::Commands cmd(device(), "refusal");
  CHECK_THROWS_WITH_AS(ops::residual_forward(cmd, t, t, t, 6, {Precision::Bf16, Precision::Bf16}),
                       doctest::Contains("whole quads"), InternalError);
}

TEST_CASE_FIXTURE(test::Gpu, "the products' GELU epilogues store and read 16 bits as the fp32 kernel on the values") {
  // y = x w^T + bias in 16 bits with gelu(y as stored) beside it (N = 12: quads; 10: pairs),
  // under the CPU register blocks and the GPU's shared tiles; and dx = (dy w) * gelu'(pre)
  // reading a 16-bit pre. Each tiling compiles its own pipelines (slow on SwiftShader): fp16
  // shares bf16's loads and stores but for the conversion, so it takes the device's tiling only.
  const MatmulTiling tilings[] = {ops::matmul_tiling(device().info()), test::kRegisters, test::kShared};
  uint32_t seed = 400;
  for (Precision p : {Precision::Bf16, Precision::Fp16})
    for (const MatmulTiling& tiling : p == Precision::Fp16 ? std::span(tilings, 1) : std::span(tilings))
      for (uint32_t N : {12u, 10u}) {
        const uint32_t M = 9, K = 7;
        const std::string what = name_of(p) + " " + tiling.name() + " N=" + std::to_string(N);
        const std::vector<float> x = rounded(test::random_vector(uint64_t(M) * K, seed += 5, -2, 2), p);
        const std::vector<float> w = test::random_vector(uint64_t(N) * K, seed + 1), bias = test::random_vector(N, seed + 2);
        const std::vector<float> pre = rounded(test::random_vector(uint64_t(M) * N, seed + 3, -3, 3), p);
        vk::Device& dev = device();
        auto bx = test::to_device(dev, x, "x"), hx = test::to_device(dev, packed(x, p), "x, 16 bits");
        auto bw = test::to_device(dev, w, "w"), bbias = test::to_device(dev, bias, "bias");
        auto bpre = test::to_device(dev, pre, "pre"), hpre = test::to_device(dev, packed(pre, p), "pre, 16 bits");
        auto y = test::zeros(dev, uint64_t(M) * N, "y"), hy = test::zeros(dev, uint64_t(M) * N, "y, 16 bits");
        auto hact = test::zeros(dev, uint64_t(M) * N, "act, 16 bits");
        auto g = test::zeros(dev, uint64_t(M) * N, "gelu'"), hg = test::zeros(dev, uint64_t(M) * N, "gelu' of 16 bits");
        const MatmulParams plain{.M = M, .N = N, .K = K, .trans_b = true, .tiling = tiling};
        MatmulParams gelu = plain;
        gelu.epilogue = MatmulParams::Epilogue::Gelu, gelu.a_format = gelu.c_format = gelu.e_format = p;
        // dy (M,K) = x here, times w (K,N) = w read as stored (N,K) without the transpose: any B will do.
        MatmulParams grad{.M = M, .N = N, .K = K, .trans_b = true, .epilogue = MatmulParams::Epilogue::GeluGrad,
                          .tiling = tiling};
        MatmulParams half_grad = grad;
        half_grad.e_format = p;
        vk::Commands cmd(dev, "GELU epilogues, 16 bits");
        ops::matmul(cmd, bx, bw, y, plain, vk::View(bbias));
        ops::matmul(cmd, hx, bw, hy, gelu, vk::View(bbias), vk::View(hact));
        ops::matmul(cmd, bx, bw, g, grad, std::nullopt, vk::View(bpre));
        ops::matmul(cmd, bx, bw, hg, half_grad, std::nullopt, vk::View(hpre));
        cmd.run();
        // gelu of y as stored, by the GELU kernel (the same function in shaders/gelu.glsl).
        const std::vector<float> kept = rounded(test::to_host(y), p);
        auto bkept = test::to_device(dev, kept, "y as stored"), act = test::zeros(dev, kept.size(), "act");
        vk::Commands gcmd(dev, "gelu");
        ops::gelu_forward(gcmd, bkept, act, uint32_t(kept.size()));
        gcmd.run();
        check_bits(words(hy, kept.size()), packed(test::to_host(y), p), what + ": y");
        check_bits(words(hact, kept.size()), packed(test::to_host(act), p), what + ": gelu(y)");
        check_bits(test::to_host(hg), test::to_host(g), what + ": the product times gelu'(pre)");
      }
  auto t = test::zeros(device(), 64, "t");
  vk::Commands cmd(device(), "refusal");
  const MatmulParams mixed{.M = 4, .N = 8, .K = 4, .epilogue = MatmulParams::Epilogue::Gelu,
                           .c_format = Precision::Bf16};
  CHECK_THROWS_WITH_AS(ops::matmul(cmd, t, t, t, mixed, std::nullopt, vk::View(t)),
                       doctest::Contains("stores its activation as C"), InternalError);
}

// With qkv and y in 16 bits every product of the matrix form reads 16-bit operands: P, dS and
// dy are packed, rounded, for the products that read them (ops/attention.h). So the scores and
// lse are the fp32 kernels' on the same values, bit for bit, while y and dqkv are theirs to
// within that rounding (each P and dS off by at most u of itself, dy by u of itself: a few u
// of the largest magnitude), and differ from them: the products really read rounded values.
TEST_CASE_FIXTURE(test::Gpu, "attention in its matrix form reads qkv and y in 16 bits, its products reading P, dS and dy rounded") {
  // Heads of 8 and of 6 (pairs, not quads, of y), an odd T.
  struct Shape {
    uint32_t B, T, C, NH;
  };
  // fp16 shares bf16's loads and stores but for the conversion: it takes the second shape only
  // (each shape compiles its own pipelines, slow on SwiftShader).
  const Shape shapes[] = {{2, 8, 16, 2}, {1, 7, 12, 2}};
  uint32_t seed = 500;
  for (Precision p : {Precision::Bf16, Precision::Fp16})
    for (const Shape& s : p == Precision::Fp16 ? std::span(shapes + 1, 1) : std::span(shapes)) {
      const std::string what = name_of(p) + " T=" + std::to_string(s.T) + " C=" + std::to_string(s.C);
      const uint64_t rows = uint64_t(s.B) * s.T, nq = rows * 3 * s.C, ny = rows * s.C;
      const std::vector<float> qkv = rounded(test::random_vector(nq, seed += 3, -2, 2), p);
      const std::vector<float> dy = test::random_vector(ny, seed + 1);
      vk::Device& dev = device();
      auto bq = test::to_device(dev, qkv, "qkv"), hq = test::to_device(dev, packed(qkv, p), "qkv, 16 bits");
      auto bdy = test::to_device(dev, dy, "dy");
      auto y = test::zeros(dev, ny, "y"), hy = test::zeros(dev, ny, "y, 16 bits");
      auto lse = test::zeros(dev, rows * s.NH, "lse"), hlse = test::zeros(dev, rows * s.NH, "lse from 16 bits");
      auto scratch = test::zeros(dev, ops::attention_scratch_floats(s.B, s.T, s.C, s.NH, p), "scratch", vk::Category::Scratch);
      vk::Commands cmd(dev, "attention forward, 16 bits");
      ops::attention_forward(cmd, bq, y, lse, scratch, s.B, s.T, s.C, s.NH, ops::Form::Matrix);
      ops::attention_forward(cmd, hq, hy, hlse, scratch, s.B, s.T, s.C, s.NH, ops::Form::Matrix, {p, p});
      cmd.run();
      const double u = p == Precision::Bf16 ? 0x1p-8 : 0x1p-11;  // unit roundoff
      const std::vector<float> want_y = test::to_host(y);
      const std::vector<float> got_y = test::unpacked(words(hy, ny), p, ny);
      test::check_close(got_y, want_y, 4 * u * test::max_abs(want_y), 2 * u, what + ": y");
      CHECK_MESSAGE(words(hy, ny) != packed(want_y, p), what, ": y read P rounded");
      // The scores' products read the same values in both; on matrix units they sum in the
      // units' order (NVIDIA's to within an fp32 rounding or two), elsewhere in the SIMT kernel's.
      if (ops::default_matrix_tiling(dev.info(), p))
        test::check_close(test::to_host(hlse), test::to_host(lse), 0x1p-18 * test::max_abs(test::to_host(lse)),
                          0x1p-18, what + ": lse on matrix units");
      else
        check_bits(test::to_host(hlse), test::to_host(lse), what + ": lse");
      // The backward reads y as stored: the fp32 kernels get those values.
      auto by = test::to_device(dev, rounded(test::to_host(y), p), "y as stored");
      auto dq = test::zeros(dev, nq, "dqkv"), hdq = test::zeros(dev, nq, "dqkv from 16 bits");
      vk::Commands back(dev, "attention backward, 16 bits");
      ops::attention_backward(back, bq, by, lse, bdy, dq, scratch, s.B, s.T, s.C, s.NH, ops::Form::Matrix);
      ops::attention_backward(back, hq, hy, lse, bdy, hdq, scratch, s.B, s.T, s.C, s.NH, ops::Form::Matrix, {p, p});
      back.run();
      const std::vector<float> want_dq = test::to_host(dq), got_dq = test::to_host(hdq);
      test::check_close(got_dq, want_dq, 8 * u * test::max_abs(want_dq), 8 * u, what + ": dqkv");
      CHECK_MESSAGE(got_dq != want_dq, what, ": dqkv read dS, P and dy rounded");
    }
  // The row kernels take fp32 only.
  auto t = test::zeros(device(), 4096, "t");
  vk::Commands cmd(device(), "refusal");
  CHECK_THROWS_WITH_AS(ops::attention_forward(cmd, t, t, t, t, 1, 4, 8, 2, ops::Form::Direct,
                                              {Precision::Bf16, Precision::Bf16}),
                       doctest::Contains("fp32 tensors only"), InternalError);
}

}  // namespace kernels_half_gpt_test
