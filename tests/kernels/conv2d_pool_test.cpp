// Conv2d, ReLU and a 2x2 max pooling in one pass (ops/conv2d_pool.h) against the CPU
// reference of the three layers, forward and backward, in fp32 and with 16-bit x and y.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "check.h"
#include "gpu.h"
#include "half_check.h"
#include "ops/conv2d.h"
#include "ops/conv2d_pool.h"
#include "ref/conv2d.h"
#include "ref/maxpool2d.h"
#include "util/error.h"
#include "vk/commands.h"

namespace kernels_conv2d_pool_test {

using namespace brigade;
using ops::Conv2dShape;
using ops::Precision;

namespace {

struct Reference {
  std::vector<double> conv, y, dconv;
};

// conv(x) + bias, then MaxPool2d(2) with the ReLU folded in, and its backward, in double.
Reference reference(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                    const std::vector<float>& dy, const Conv2dShape& s) {
  const std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end()), bd(b.begin(), b.end()),
      dyd(dy.begin(), dy.end());
  const size_t pooled = size_t(s.n) * s.oc * (s.out_h() / 2) * (s.out_w() / 2);
  Reference r{std::vector<double>(s.y_size()), std::vector<double>(pooled), std::vector<double>(s.y_size())};
  ref::conv2d_forward<double>(xd, wd, bd, r.conv, s);
  const ops::MaxPool2dShape pool{s.n, s.oc, s.out_h(), s.out_w(), 2, 2, true};
  ref::maxpool2d_forward<double>(r.conv, r.y, pool);
  ref::maxpool2d_backward_data<double>(r.conv, dyd, r.dconv, pool);
  return r;
}

std::vector<float> narrowed(const std::vector<double>& v) { return {v.begin(), v.end()}; }


}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "conv2d with ReLU and pooling folded in matches the three layers' CPU reference") {
  // fashion-cnn's first convolution (1 to 32 channels, 3x3, padding 1, 28x28) on 3 samples; a
  // 5x3 kernel at stride 2; three input channels without padding. Samples whose first rows
  // are zero make windows of equal values (the bias): ties go to the first element, and a
  // negative bias leaves the whole window's gradient out.
  const Conv2dShape shapes[] = {{3, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1}, {2, 1, 19, 15, 8, 5, 3, 2, 2, 2, 1},
                                {1, 3, 10, 10, 4, 3, 3, 1, 1, 0, 0}};
  uint32_t seed = 600;
  for (const Conv2dShape& s : shapes)
    for (Precision p : {Precision::Fp32, Precision::Bf16}) {
      REQUIRE(ops::conv2d_pool_fits(s));
      const std::string what = std::to_string(s.ic) + " to " + std::to_string(s.oc) + " channels, " +
                               std::to_string(s.h) + "x" + std::to_string(s.w) + " " + ops::precision_name(p);
      std::vector<float> x = test::rounded(test::random_vector(s.x_size(), seed += 5, -2, 2), p);
      std::fill(x.begin(), x.begin() + 3 * s.w, 0.0f);  // the first sample's first rows
      const std::vector<float> w = test::random_vector(s.weight_size(), seed + 1);
      std::vector<float> b = test::random_vector(s.oc, seed + 2);
      b[0] = 0.5f, b[1] = -0.5f;
      const std::vector<float> dy = test::random_vector(s.y_size() / 4, seed + 3);
      const Reference want = reference(x, w, b, dy, s);

      vk::Device& dev = device();
      auto bx = test::to_device(dev, ops::is_half(p) ? test::packed(x, p) : x, "x");
      auto bw = test::to_device(dev, w, "weight"), bb = test::to_device(dev, b, "bias");
      auto bdy = test::to_device(dev, dy, "dy");
      auto y = test::zeros(dev, s.y_size() / 4, "y"), codes = test::zeros(dev, ops::conv2d_pool_code_words(s) * s.n, "codes");
      // The spreading back writes the convolution's output gradient whole.
      auto scratch = test::to_device(dev, test::random_vector(ops::conv2d_pool_scratch_floats(s, s.n), seed + 4),
                                     "scratch", vk::Category::Scratch);
      vk::Commands cmd(dev, "conv2d pool");
      ops::conv2d_pool_forward(cmd, bx, bw, vk::View(bb), y, codes, s, scratch, {p, p});
      const vk::View dconv = ops::conv2d_pool_unpool(cmd, bdy, codes, s, scratch);
      cmd.run();
      std::vector<float> got_y = test::to_host(y);
      if (ops::is_half(p)) {
        std::vector<uint32_t> words(got_y.size());
        for (size_t i = 0; i < words.size(); ++i) words[i] = std::bit_cast<uint32_t>(got_y[i]);
        std::vector<float> values(s.y_size() / 4);
        ops::unpack_on_host(std::span<const uint32_t>(words.data(), (values.size() + 1) / 2), values, p);
        got_y = values;
      }
      // The convolution's sums run in another order than the reference's; 16 bits round the result.
      const double scale = test::max_abs(narrowed(want.y));
      test::check_close(got_y, narrowed(want.y), (ops::is_half(p) ? std::ldexp(1.0, -8) : 1e-5) * scale, 0,
                        what + ": y");
      std::vector<float> got_dconv = test::to_host(scratch);
      got_dconv.resize(dconv.range / 4);
      test::check_close(got_dconv, narrowed(want.dconv), 0, 0, what + ": dconv");
    }
}

TEST_CASE_FIXTURE(test::Gpu, "conv2d's weight gradient through the pooling fold matches finite differences") {
  // The loss sum(y * r) of the folded layer. Its weight gradient straight from the pooled
  // gradient and the codes (conv2d_pool_backward_weight), and the convolution's own backward
  // on the gradient spread back (the input gradient's path), against central differences of
  // the CPU forward; 12 output channels: invocations of 4 channels.
  for (const Conv2dShape& s : {Conv2dShape{2, 1, 8, 8, 4, 3, 3, 1, 1, 1, 1}, Conv2dShape{3, 2, 8, 12, 12, 3, 3, 1, 1, 1, 1}}) {
    const std::string what = std::to_string(s.ic) + " to " + std::to_string(s.oc) + " channels";
    const std::vector<float> x = test::rounded(test::random_vector(s.x_size(), 71, -2, 2), Precision::Bf16);
    const std::vector<float> w = test::random_vector(s.weight_size(), 72);
    const std::vector<float> b = test::random_vector(s.oc, 73), r = test::random_vector(s.y_size() / 4, 74);
    vk::Device& dev = device();
    auto bx = test::to_device(dev, x, "x"), hx = test::to_device(dev, test::packed(x, Precision::Bf16), "x, 16 bits");
    auto bw = test::to_device(dev, w, "weight"), bb = test::to_device(dev, b, "bias");
    auto br = test::to_device(dev, r, "dy");
    auto y = test::zeros(dev, s.y_size() / 4, "y"), codes = test::zeros(dev, ops::conv2d_pool_code_words(s) * s.n, "codes");
    auto dw = test::zeros(dev, s.weight_size(), "dweight"), db = test::zeros(dev, s.oc, "dbias");
    auto pdw = test::zeros(dev, s.weight_size(), "dweight, pooled"), pdb = test::zeros(dev, s.oc, "dbias, pooled");
    auto hdw = test::zeros(dev, s.weight_size(), "dweight, 16-bit x"), hdb = test::zeros(dev, s.oc, "dbias, 16-bit x");
    auto scratch = test::zeros(dev, ops::conv2d_pool_scratch_floats(s, s.n), "scratch", vk::Category::Scratch);
    vk::Commands cmd(dev, "conv2d pool gradient");
    ops::conv2d_pool_forward(cmd, bx, bw, vk::View(bb), y, codes, s, scratch);
    const vk::View dconv = ops::conv2d_pool_unpool(cmd, br, codes, s, scratch);
    ops::conv2d_backward_weight(cmd, dconv, bx, dw, vk::View(db), s, ops::conv2d_pool_conv_scratch(s, scratch));
    ops::conv2d_pool_backward_weight(cmd, br, codes, bx, pdw, vk::View(pdb), s, scratch);
    ops::conv2d_pool_backward_weight(cmd, br, codes, hx, hdw, vk::View(hdb), s, scratch, Precision::Bf16);
    cmd.run();
    const auto loss = [&](const std::vector<float>& weight, const std::vector<float>& bias) {
      const Reference f = reference(x, weight, bias, r, s);
      double l = 0;
      for (size_t i = 0; i < f.y.size(); ++i) l += f.y[i] * r[i];
      return l;
    };
    const double eps = 1e-3;
    std::vector<float> fd_w(w.size()), fd_b(b.size());
    for (size_t i = 0; i < w.size(); ++i) {
      std::vector<float> up = w, down = w;
      up[i] += float(eps), down[i] -= float(eps);
      fd_w[i] = float((loss(up, b) - loss(down, b)) / (double(up[i]) - down[i]));
    }
    for (size_t i = 0; i < b.size(); ++i) {
      std::vector<float> up = b, down = b;
      up[i] += float(eps), down[i] -= float(eps);
      fd_b[i] = float((loss(w, up) - loss(w, down)) / (double(up[i]) - down[i]));
    }
    CHECK(test::max_abs(fd_w) > 0.1);
    for (const auto& [gw, gb, how] : {std::tuple{&dw, &db, "spread back"}, std::tuple{&pdw, &pdb, "from the pooled gradient"}}) {
      test::check_close(test::to_host(*gw), fd_w, 1e-3 * test::max_abs(fd_w), 1e-3, what + ": dweight, " + how);
      test::check_close(test::to_host(*gb), fd_b, 1e-3 * test::max_abs(fd_b), 1e-3, what + ": dbias, " + how);
    }
    test::check_bits(test::to_host(hdw), test::to_host(pdw), what + ": dweight from a 16-bit x");
    test::check_bits(test::to_host(hdb), test::to_host(pdb), what + ": dbias from a 16-bit x");
  }
}

TEST_CASE_FIXTURE(test::Gpu, "conv2d's pooling on tiles of its output matches the three layers' CPU reference") {
  // The fold for convolutions the one-pass kernel does not take: 16 input channels on 14 x 14
  // (Winograd's form on lavapipe, its output transform pooling 4x4 tiles), on 7 x 9 (an odd
  // side: the last row and column in no window) and on 6 x 6 (2x2 tiles); two input channels
  // with a 5x3 kernel (the matrix form, pooled by its own pass). SwiftShader runs every one in
  // its direct form, pooled by that pass.
  const Conv2dShape shapes[] = {{2, 16, 14, 14, 8, 3, 3, 1, 1, 1, 1}, {2, 16, 7, 9, 4, 3, 3, 1, 1, 1, 1},
                                {1, 16, 6, 6, 4, 3, 3, 1, 1, 1, 1}, {2, 2, 11, 9, 4, 5, 3, 1, 1, 1, 1}};
  uint32_t seed = 800;
  for (const Conv2dShape& s : shapes) {
    REQUIRE_FALSE(ops::conv2d_pool_fits(s));
    REQUIRE(ops::conv2d_pool_tiles_fit(s));
    const std::string what = std::to_string(s.ic) + " to " + std::to_string(s.oc) + " channels, " + std::to_string(s.h) +
                             "x" + std::to_string(s.w) + ", tile " +
                             std::to_string(ops::conv2d_pool_tile(device().info(), s));
    std::vector<float> x = test::random_vector(s.x_size(), seed += 5, -2, 2);
    std::fill(x.begin(), x.begin() + 3 * s.w, 0.0f);
    const std::vector<float> w = test::random_vector(s.weight_size(), seed + 1);
    std::vector<float> b = test::random_vector(s.oc, seed + 2);
    b[0] = 0.5f, b[1] = -0.5f;
    const uint64_t pooled = uint64_t(s.n) * s.oc * (s.out_h() / 2) * (s.out_w() / 2);
    const std::vector<float> dy = test::random_vector(pooled, seed + 3);
    const Reference want = reference(x, w, b, dy, s);

    vk::Device& dev = device();
    auto bx = test::to_device(dev, x, "x"), bw = test::to_device(dev, w, "weight"), bb = test::to_device(dev, b, "bias");
    auto bdy = test::to_device(dev, dy, "dy");
    auto y = test::zeros(dev, pooled, "y"), codes = test::zeros(dev, ops::conv2d_pool_code_words(s) * s.n, "codes");
    auto scratch = test::to_device(dev, test::random_vector(ops::conv2d_pool_scratch_floats(s, s.n), seed + 4),
                                   "scratch", vk::Category::Scratch);  // the spreading back writes it whole
    vk::Commands cmd(dev, "conv2d pool tiles");
    ops::conv2d_pool_forward(cmd, bx, bw, vk::View(bb), y, codes, s, scratch);
    const vk::View dconv = ops::conv2d_pool_unpool(cmd, bdy, codes, s, scratch);
    cmd.run();
    test::check_close(test::to_host(y), narrowed(want.y), 1e-5 * test::max_abs(narrowed(want.y)), 0, what + ": y");
    std::vector<float> got = test::to_host(scratch);
    got.resize(dconv.range / 4);
    test::check_close(got, narrowed(want.dconv), 0, 0, what + ": dconv");
  }
}

TEST_CASE_FIXTURE(test::Gpu, "conv2d's pooling fold takes only the shapes it can keep in registers") {
  CHECK(ops::conv2d_pool_fits({1, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1}));
  CHECK_FALSE(ops::conv2d_pool_fits({1, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1}));  // 18432 weights
  CHECK_FALSE(ops::conv2d_pool_fits({1, 1, 14, 14, 32, 3, 3, 1, 1, 1, 1}));   // 7 pooled a row: no pairs
  CHECK_FALSE(ops::conv2d_pool_fits({1, 1, 28, 28, 6, 3, 3, 1, 1, 1, 1}));    // codes not whole words
  auto t = test::zeros(device(), 64, "t");
  vk::Commands cmd(device(), "refusal");
  CHECK_THROWS_WITH_AS(ops::conv2d_pool_backward_weight(cmd, t, t, t, t, std::nullopt, {1, 1, 14, 14, 32, 3, 3, 1, 1, 1, 1}, t),
                       doctest::Contains("conv2d_pool_fits"), InternalError);
  CHECK_FALSE(ops::conv2d_pool_tiles_fit({1, 1, 3, 3, 4, 3, 3, 1, 1, 0, 0}));  // a 1 x 1 output
  CHECK_THROWS_WITH_AS(ops::conv2d_pool_forward(cmd, t, t, std::nullopt, t, t, {1, 1, 3, 3, 4, 3, 3, 1, 1, 0, 0}, t),
                       doctest::Contains("2 x 2 at least"), InternalError);
}

TEST_CASE_FIXTURE(test::Gpu, "the tiles fold's backward from the pooled gradient equals the convolution's on it spread back") {
  // In Winograd's form the passes read dy through the codes (nothing spread back): the input
  // and weight gradients are the bits of the convolution's backward on the spread-back
  // gradient, the bias gradient the same sum in another order. Both gradients at once, and
  // each alone (the split backward's B and W). The shapes of the test above.
  const Conv2dShape shapes[] = {{2, 16, 14, 14, 8, 3, 3, 1, 1, 1, 1}, {2, 16, 7, 9, 4, 3, 3, 1, 1, 1, 1},
                                {1, 16, 6, 6, 4, 3, 3, 1, 1, 1, 1}, {2, 2, 11, 9, 4, 5, 3, 1, 1, 1, 1}};
  uint32_t seed = 900;
  for (const Conv2dShape& s : shapes) {
    const std::string what = std::to_string(s.ic) + " to " + std::to_string(s.oc) + " channels, " + std::to_string(s.h) +
                             "x" + std::to_string(s.w);
    const std::vector<float> x = test::random_vector(s.x_size(), seed += 5, -2, 2);
    const std::vector<float> w = test::random_vector(s.weight_size(), seed + 1), b = test::random_vector(s.oc, seed + 2);
    const uint64_t pooled = uint64_t(s.n) * s.oc * (s.out_h() / 2) * (s.out_w() / 2);
    const std::vector<float> dy = test::random_vector(pooled, seed + 3);
    const Reference want = reference(x, w, b, dy, s);
    std::vector<double> db_want(s.oc, 0.0);
    for (size_t i = 0; i < want.dconv.size(); ++i) db_want[(i / (s.out_h() * s.out_w())) % s.oc] += want.dconv[i];

    vk::Device& dev = device();
    auto bx = test::to_device(dev, x, "x"), bw = test::to_device(dev, w, "weight"), bb = test::to_device(dev, b, "bias");
    auto bdy = test::to_device(dev, dy, "dy");
    auto y = test::zeros(dev, pooled, "y"), codes = test::zeros(dev, ops::conv2d_pool_code_words(s) * s.n, "codes");
    auto scratch = test::zeros(dev, ops::conv2d_pool_scratch_floats(s, s.n), "scratch", vk::Category::Scratch);
    auto dx_a = test::zeros(dev, s.x_size(), "dx, spread back"), dw_a = test::zeros(dev, s.weight_size(), "dweight, spread back");
    auto dx_b = test::zeros(dev, s.x_size(), "dx"), dw_b = test::zeros(dev, s.weight_size(), "dweight");
    auto dx_c = test::zeros(dev, s.x_size(), "dx alone"), dw_c = test::zeros(dev, s.weight_size(), "dweight alone");
    auto db_b = test::zeros(dev, s.oc, "dbias"), db_c = test::zeros(dev, s.oc, "dbias alone");
    vk::Commands cmd(dev, "conv2d pool tiles backward");
    ops::conv2d_pool_forward(cmd, bx, bw, vk::View(bb), y, codes, s, scratch);
    const vk::View dconv = ops::conv2d_pool_unpool(cmd, bdy, codes, s, scratch);
    const vk::View rest = ops::conv2d_pool_conv_scratch(s, scratch);
    const ops::Formats f{};
    ops::conv2d_backward_weight(cmd, dconv, bx, dw_a, std::nullopt, s, rest, std::nullopt, f);
    ops::conv2d_backward_data(cmd, dconv, bw, dx_a, s, rest, std::nullopt, f);
    ops::conv2d_pool_backward(cmd, bdy, codes, bx, bw, vk::View(dx_b), vk::View(dw_b), vk::View(db_b), s, scratch);
    ops::conv2d_pool_backward(cmd, bdy, codes, bx, bw, vk::View(dx_c), std::nullopt, std::nullopt, s, scratch);
    ops::conv2d_pool_backward(cmd, bdy, codes, bx, bw, std::nullopt, vk::View(dw_c), vk::View(db_c), s, scratch);
    cmd.run();
    test::check_bits(test::to_host(dx_b), test::to_host(dx_a), what + ": dx");
    test::check_bits(test::to_host(dw_b), test::to_host(dw_a), what + ": dweight");
    test::check_bits(test::to_host(dx_c), test::to_host(dx_a), what + ": dx alone");
    test::check_bits(test::to_host(dw_c), test::to_host(dw_a), what + ": dweight alone");
    test::check_close(test::to_host(db_b), narrowed(db_want), 1e-5 * test::max_abs(narrowed(db_want)), 1e-5, what + ": dbias");
    test::check_bits(test::to_host(db_c), test::to_host(db_b), what + ": dbias alone");
  }
}

TEST_CASE_FIXTURE(test::Gpu, "the tiles fold reads a 16-bit x and stores a 16-bit y as the fp32 fold on the values") {
  // The shapes of the tests above. Where a shape's products would take the device's matrix
  // units (conv2d_matrix_units) they read the weight and dy rounded, not the fp32 fold's
  // values: tests/kernels/conv2d_form_test.cpp checks those. SwiftShader's direct form takes no
  // 16-bit x, and its layer none (Conv2d::stores_half).
  const Conv2dShape shapes[] = {{2, 16, 14, 14, 8, 3, 3, 1, 1, 1, 1}, {2, 16, 7, 9, 4, 3, 3, 1, 1, 1, 1},
                                {1, 16, 6, 6, 4, 3, 3, 1, 1, 1, 1}, {2, 2, 11, 9, 4, 5, 3, 1, 1, 1, 1}};
  if (ops::form_for(device().info()) == ops::Form::Direct) {
    const Conv2dShape& s = shapes[0];
    auto x = test::zeros(device(), s.x_size(), "x"), w = test::zeros(device(), s.weight_size(), "weight");
    auto y = test::zeros(device(), s.y_size(), "y"), codes = test::zeros(device(), ops::conv2d_pool_code_words(s) * s.n, "codes");
    auto scratch = test::zeros(device(), ops::conv2d_pool_scratch_floats(s, s.n, Precision::Bf16), "scratch");
    vk::Commands cmd(device(), "refused");
    CHECK_THROWS_WITH_AS(ops::conv2d_pool_forward(cmd, x, w, std::nullopt, y, codes, s, scratch, {Precision::Bf16, Precision::Bf16}),
                         doctest::Contains("direct form reads and writes fp32 only"), InternalError);
    return;
  }
  uint32_t seed = 1000;
  int checked = 0;
  for (Precision p : {Precision::Bf16, Precision::Fp16})
    for (const Conv2dShape& s : shapes) {
      if (ops::conv2d_matrix_units(device().info(), s, p)) continue;
      ++checked;
      const std::string what = std::to_string(s.ic) + " to " + std::to_string(s.oc) + " channels, " +
                               std::to_string(s.h) + "x" + std::to_string(s.w) + " " + ops::precision_name(p);
      const std::vector<float> x = test::rounded(test::random_vector(s.x_size(), seed += 5, -2, 2), p);
      const std::vector<float> w = test::random_vector(s.weight_size(), seed + 1), b = test::random_vector(s.oc, seed + 2);
      const uint64_t pooled = uint64_t(s.n) * s.oc * (s.out_h() / 2) * (s.out_w() / 2);
      const std::vector<float> dy = test::random_vector(pooled, seed + 3);
      vk::Device& dev = device();
      auto bx = test::to_device(dev, x, "x"), hx = test::to_device(dev, test::packed(x, p), "x, 16 bits");
      auto bw = test::to_device(dev, w, "weight"), bb = test::to_device(dev, b, "bias");
      auto bdy = test::to_device(dev, dy, "dy");
      auto y = test::zeros(dev, pooled, "y"), hy = test::zeros(dev, pooled, "y, 16 bits");
      const uint64_t words = ops::conv2d_pool_code_words(s) * s.n;
      auto codes = test::zeros(dev, words, "codes"), hcodes = test::zeros(dev, words, "codes from 16 bits");
      auto dx = test::zeros(dev, s.x_size(), "dx"), hdx = test::zeros(dev, s.x_size(), "dx from 16 bits");
      auto dw = test::zeros(dev, s.weight_size(), "dweight"), hdw = test::zeros(dev, s.weight_size(), "dweight");
      auto scratch = test::zeros(dev, ops::conv2d_pool_scratch_floats(s, s.n), "scratch", vk::Category::Scratch);
      auto hscratch = test::zeros(dev, ops::conv2d_pool_scratch_floats(s, s.n, p), "scratch", vk::Category::Scratch);
      vk::Commands cmd(dev, "conv2d pool tiles in 16 bits");
      ops::conv2d_pool_forward(cmd, bx, bw, vk::View(bb), y, codes, s, scratch);
      ops::conv2d_pool_forward(cmd, hx, bw, vk::View(bb), hy, hcodes, s, hscratch, {p, p});
      ops::conv2d_pool_backward(cmd, bdy, codes, bx, bw, vk::View(dx), vk::View(dw), std::nullopt, s, scratch);
      ops::conv2d_pool_backward(cmd, bdy, hcodes, hx, bw, vk::View(hdx), vk::View(hdw), std::nullopt, s, hscratch,
                                {p, Precision::Fp32});
      cmd.run();
      std::vector<float> got = test::to_host(hy);
      got.resize((pooled + 1) / 2);
      test::check_bits(got, test::packed(test::to_host(y), p), what + ": y");
      test::check_bits(test::to_host(hcodes), test::to_host(codes), what + ": codes");
      test::check_bits(test::to_host(hdx), test::rounded(test::to_host(dx), p), what + ": dx");
      test::check_bits(test::to_host(hdw), test::to_host(dw), what + ": dweight");
    }
  CHECK(checked > 0);
}

}  // namespace kernels_conv2d_pool_test
