#include <doctest/doctest.h>

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "check.h"
#include "half_check.h"
#include "gpu.h"
#include "ops/activation.h"
#include "ops/linear.h"
#include "ref/linear.h"
#include "vk/commands.h"

namespace kernels_linear_test {

using namespace brigade;

namespace {

// fp32 sums of up to 129 products of values in [-1, 1] against a double reference.
constexpr double kAtol = 1e-4, kRtol = 1e-5;

struct Shape {
  uint32_t n, in, out;
};
// Odd sizes, and sizes that are multiples of 4 (where the matmul takes vec4 loads).
const Shape kOddShapes[] = {{1, 1, 1}, {7, 13, 5}, {33, 129, 65}};
const Shape kAlignedShapes[] = {{16, 12, 8}, {20, 32, 36}};

std::string describe(const Shape& s, bool bias) {
  return "N " + std::to_string(s.n) + ", " + std::to_string(s.in) + " -> " +
         std::to_string(s.out) + (bias ? " with bias" : " without bias");
}

std::span<const double> maybe(bool on, const std::vector<double>& v) {
  return on ? std::span<const double>(v) : std::span<const double>();
}

void check_forward(vk::Device& dev, std::span<const Shape> shapes,
                   std::optional<ops::MatmulTiling> tiling = std::nullopt) {
  uint32_t seed = 0;
  for (const Shape& s : shapes)
    for (bool has_bias : {true, false}) {
      const auto x = test::random_vector(s.n * s.in, ++seed), w = test::random_vector(s.out * s.in, ++seed);
      const auto b = test::random_vector(s.out, ++seed);
      auto bx = test::to_device(dev, x, "x"), bw = test::to_device(dev, w, "weight");
      auto bb = test::to_device(dev, b, "bias");
      // y starts as garbage: the forward pass overwrites it.
      auto by = test::to_device(dev, test::random_vector(s.n * s.out, ++seed), "y");
      vk::Commands cmd(dev, "linear forward");
      ops::linear_forward(cmd, bx, bw, has_bias ? std::optional<vk::View>(bb) : std::nullopt, by,
                          s.n, s.in, s.out, tiling);
      cmd.run();
      std::vector<double> want(s.n * s.out);
      const auto bd = test::to_double(b);
      ref::linear_forward<double>(test::to_double(x), test::to_double(w), maybe(has_bias, bd), want,
                                  s.n, s.in, s.out);
      test::check_close(test::to_host(by), test::to_float(want), kAtol, kRtol, describe(s, has_bias));
    }
}

void check_backward(vk::Device& dev, std::span<const Shape> shapes,
                    std::optional<ops::MatmulTiling> tiling = std::nullopt) {
  uint32_t seed = 50;
  for (const Shape& s : shapes)
    for (bool has_bias : {true, false}) {
      const auto x = test::random_vector(s.n * s.in, ++seed), w = test::random_vector(s.out * s.in, ++seed);
      const auto dy = test::random_vector(s.n * s.out, ++seed);
      // Gradient buffers start non-zero, as they do after an earlier micro-batch.
      const auto dx0 = test::random_vector(s.n * s.in, ++seed), dw0 = test::random_vector(s.out * s.in, ++seed);
      const auto db0 = test::random_vector(s.out, ++seed);
      auto bx = test::to_device(dev, x, "x"), bw = test::to_device(dev, w, "weight");
      auto bdy = test::to_device(dev, dy, "dy"), bdx = test::to_device(dev, dx0, "dx");
      auto bdw = test::to_device(dev, dw0, "dweight"), bdb = test::to_device(dev, db0, "dbias");
      vk::Commands cmd(dev, "linear backward");
      ops::linear_backward_data(cmd, bdy, bw, bdx, s.n, s.in, s.out, tiling);
      ops::linear_backward_weight(cmd, bdy, bx, bdw, has_bias ? std::optional<vk::View>(bdb) : std::nullopt,
                                  s.n, s.in, s.out, tiling);
      cmd.run();
      auto dx = test::to_double(dx0), dw = test::to_double(dw0), db = test::to_double(db0);
      ref::linear_backward_data<double>(test::to_double(dy), test::to_double(w), dx, s.n, s.in, s.out);
      ref::linear_backward_weight<double>(test::to_double(dy), test::to_double(x), dw,
                                          has_bias ? std::span<double>(db) : std::span<double>(),
                                          s.n, s.in, s.out);
      const std::string what = describe(s, has_bias);
      test::check_close(test::to_host(bdx), test::to_float(dx), kAtol, kRtol, "dx, " + what);
      test::check_close(test::to_host(bdw), test::to_float(dw), kAtol, kRtol, "dweight, " + what);
      // Without a bias the bias gradient buffer is not touched.
      test::check_close(test::to_host(bdb), test::to_float(db), kAtol, kRtol, "dbias, " + what);
    }
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "linear forward matches the CPU reference with and without bias") {
  check_forward(device(), kOddShapes);
}

TEST_CASE_FIXTURE(test::Gpu, "linear forward matches the CPU reference at sizes that take vec4 loads") {
  check_forward(device(), kAlignedShapes);
}

TEST_CASE_FIXTURE(test::Gpu, "linear backward adds its data and weight and bias gradients to what the buffers held") {
  check_backward(device(), kOddShapes);
}

TEST_CASE_FIXTURE(test::Gpu, "linear backward adds its gradients correctly at sizes that take vec4 loads") {
  check_backward(device(), kAlignedShapes);
}

TEST_CASE_FIXTURE(test::Gpu, "linear forward and backward match the CPU reference on shared-memory tiles") {
  // The GPU kernel, forced on whatever device runs the tests.
  const ops::MatmulTiling shared{ops::MatmulTiling::Variant::Shared, 16, 16, 4, 4, 16, 0};
  check_forward(device(), kOddShapes, shared);
  check_forward(device(), kAlignedShapes, shared);
  check_backward(device(), kOddShapes, shared);
  check_backward(device(), kAlignedShapes, shared);
}

TEST_CASE_FIXTURE(test::Gpu, "linear weight gradients summed over micro-batches equal the whole batch's") {
  // Two micro-batches as views of one batch, accumulated into zeroed gradients, against the
  // whole batch in one call. Each half starts at a multiple of 256 bytes, the largest
  // storage-offset alignment Vulkan allows (SwiftShader's).
  vk::Device& dev = device();
  const uint32_t n = 32, half = 16, in = 8, out = 4;
  auto x = test::to_device(dev, test::random_vector(n * in, 1), "x");
  auto dy = test::to_device(dev, test::random_vector(n * out, 2), "dy");
  auto dw_micro = test::zeros(dev, out * in, "dweight micro"), db_micro = test::zeros(dev, out, "dbias micro");
  auto dw_whole = test::zeros(dev, out * in, "dweight whole"), db_whole = test::zeros(dev, out, "dbias whole");
  vk::Commands cmd(dev, "micro-batches");
  for (uint32_t m = 0; m < 2; ++m)
    ops::linear_backward_weight(cmd, {dy, m * half * out * 4, half * out * 4}, {x, m * half * in * 4, half * in * 4},
                                dw_micro, vk::View(db_micro), half, in, out);
  ops::linear_backward_weight(cmd, dy, x, dw_whole, vk::View(db_whole), n, in, out);
  cmd.run();
  test::check_close(test::to_host(dw_micro), test::to_host(dw_whole), 1e-5, 1e-5, "dweight");
  test::check_close(test::to_host(db_micro), test::to_host(db_whole), 1e-5, 1e-5, "dbias");
}

TEST_CASE("linear backward on the CPU matches finite differences") {
  // L = sum(y * R) for fixed random R, so dL/dy = R.
  for (bool has_bias : {true, false}) {
    const uint32_t n = 3, in = 4, out = 5;
    const auto x = test::to_double(test::random_vector(n * in, 1));
    const auto w = test::to_double(test::random_vector(out * in, 2));
    const auto b = test::to_double(test::random_vector(out, 3));
    const auto r = test::to_double(test::random_vector(n * out, 4));
    auto loss = [&](const std::vector<double>& xx, const std::vector<double>& ww,
                    const std::vector<double>& bb) {
      std::vector<double> y(n * out);
      ref::linear_forward<double>(xx, ww, maybe(has_bias, bb), y, n, in, out);
      double l = 0;
      for (size_t i = 0; i < y.size(); ++i) l += y[i] * r[i];
      return l;
    };
    std::vector<double> dx(n * in), dw(out * in), db(out);
    ref::linear_backward_data<double>(r, w, dx, n, in, out);
    ref::linear_backward_weight<double>(r, x, dw, has_bias ? std::span<double>(db) : std::span<double>(),
                                        n, in, out);
    const std::string what = has_bias ? " with bias" : " without bias";
    test::check_gradient([&](const std::vector<double>& v) { return loss(v, w, b); }, x, dx, 1e-6,
                         1e-7, "dx" + what);
    test::check_gradient([&](const std::vector<double>& v) { return loss(x, v, b); }, w, dw, 1e-6,
                         1e-7, "dweight" + what);
    if (has_bias)
      test::check_gradient([&](const std::vector<double>& v) { return loss(x, w, v); }, b, db,
                           1e-6, 1e-7, "dbias");
  }
}

TEST_CASE_FIXTURE(test::Gpu, "linear's bias gradient is the column sums however many lanes walk each column") {
  // One lane is the CPU devices' path, 64 the GPUs'; 3 leaves rows over. Odd feature counts
  // take scalar loads, multiples of 4 vec4s; the buffer starts non-zero and is added to.
  uint32_t seed = 900;
  for (uint32_t lanes : {1u, 3u, 64u})
    for (uint32_t features : {1u, 7u, 36u, 260u})
      for (uint32_t rows : {1u, 5u, 130u, 1000u}) {
        const auto dy = test::random_vector(rows * features, ++seed), db0 = test::random_vector(features, ++seed);
        auto bdy = test::to_device(device(), dy, "dy"), bdb = test::to_device(device(), db0, "dbias");
        vk::Commands cmd(device(), "bias backward");
        ops::linear_bias_backward(cmd, bdy, bdb, rows, features, lanes);
        cmd.run();
        auto db = test::to_double(db0);
        for (uint32_t r = 0; r < rows; ++r)
          for (uint32_t o = 0; o < features; ++o) db[o] += dy[size_t(r) * features + o];
        test::check_close(test::to_host(bdb), test::to_float(db), kAtol, kRtol,
                          std::to_string(lanes) + " lanes, " + std::to_string(rows) + "x" + std::to_string(features));
      }
}

TEST_CASE_FIXTURE(test::Gpu, "a folded ReLU's backward with the bias gradient equals relu_backward then the bias gradient, bit for bit") {
  // Every way y is stored; one lane (CPU devices), 64 (GPUs) and 3 (rows left over); odd
  // feature counts (scalar loads) and multiples of 4 (quads); y exactly 0 (no gradient) and
  // dbias starting non-zero (added to). The two-kernel path is checked against the CPU
  // reference above and in activation_test.
  uint32_t seed = 1700;
  for (ops::Precision p : {ops::Precision::Fp32, ops::Precision::Bf16, ops::Precision::Fp16})
    for (uint32_t lanes : {1u, 3u, 64u})
      for (uint32_t features : {7u, 36u})
        for (uint32_t rows : {1u, 5u, 130u}) {
          const uint32_t n = rows * features;
          std::vector<float> y = test::rounded(test::random_vector(n, ++seed), p);
          y[0] = 0.0f;
          const auto dy = test::random_vector(n, ++seed), db0 = test::random_vector(features, ++seed);
          auto by = test::to_device(device(), y, "y"), bdy = test::to_device(device(), dy, "dy");
          auto hy = test::to_device(device(), p == ops::Precision::Fp32 ? y : test::packed(y, p), "y as stored");
          auto want_g = test::zeros(device(), n, "g"), got_g = test::to_device(device(), test::random_vector(n, 5), "g, fused");
          auto want_db = test::to_device(device(), db0, "dbias"), got_db = test::to_device(device(), db0, "dbias, fused");
          vk::Commands cmd(device(), "relu and bias backward");
          ops::relu_backward(cmd, by, bdy, want_g, n);
          ops::linear_bias_backward(cmd, want_g, want_db, rows, features, lanes);
          ops::linear_relu_backward(cmd, hy, bdy, got_g, got_db, rows, features, p, lanes);
          cmd.run();
          const std::string what = std::string(ops::precision_name(p)) + ", " + std::to_string(lanes) + " lanes, " +
                                   std::to_string(rows) + "x" + std::to_string(features);
          test::check_bits(test::to_host(got_g), test::to_host(want_g), what + ": g");
          test::check_bits(test::to_host(got_db), test::to_host(want_db), what + ": dbias");
        }
}

}  // namespace kernels_linear_test
