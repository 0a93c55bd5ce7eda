#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "check.h"
#include "gpu.h"
#include "ops/layernorm.h"
#include "ref/layernorm.h"
#include "vk/commands.h"

namespace kernels_layernorm_test {

using namespace brigade;

namespace {

struct Shape {
  uint32_t N, C;
};
// C = 1 (zero variance), odd C below and above one subgroup, the model widths, and
// thousands of rows.
const Shape kShapes[] = {{1, 1}, {5, 37}, {64, 128}, {17, 768}, {1500, 37}, {3, 1001}};

std::string name(const Shape& s) { return "N=" + std::to_string(s.N) + " C=" + std::to_string(s.C); }

// Activations with a mean far from 0 relative to their spread, as after a residual stream
// has drifted: the variance must not be computed as E[x^2] - mean^2.
std::vector<float> inputs(const Shape& s, uint32_t seed) {
  return test::random_vector(size_t(s.N) * s.C, seed, 2.0f, 4.0f);
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "layernorm forward matches the CPU reference and saves each row's mean and rstd") {
  vk::Device& dev = device();
  for (const Shape& s : kShapes) {
    const auto x = inputs(s, s.C), w = test::random_vector(s.C, 1, 0.5f, 1.5f),
               b = test::random_vector(s.C, 2);
    vk::Buffer bx = test::to_device(dev, x, "x"), bw = test::to_device(dev, w, "weight"),
               bb = test::to_device(dev, b, "bias"), by = test::zeros(dev, x.size(), "y"),
               bmean = test::zeros(dev, s.N, "mean"), brstd = test::zeros(dev, s.N, "rstd");
    vk::Commands cmd(dev, "layernorm");
    ops::layernorm_forward(cmd, bx, bw, bb, by, bmean, brstd, s.N, s.C);
    cmd.run();
    const auto xd = test::to_double(x), wd = test::to_double(w), bd = test::to_double(b);
    std::vector<double> y(x.size()), mean(s.N), rstd(s.N);
    ref::layernorm_forward(xd.data(), wd.data(), bd.data(), y.data(), mean.data(), rstd.data(),
                           s.N, s.C);
    test::check_close(test::to_host(by), test::to_float(y), 1e-5, 1e-5, "y " + name(s));
    test::check_close(test::to_host(bmean), test::to_float(mean), 1e-6, 1e-6, "mean " + name(s));
    test::check_close(test::to_host(brstd), test::to_float(rstd), 0.0, 1e-5, "rstd " + name(s));
  }
}

TEST_CASE_FIXTURE(test::Gpu, "layernorm backward adds the input and parameter gradients of the CPU reference") {
  vk::Device& dev = device();
  for (const Shape& s : kShapes) {
    const size_t n = size_t(s.N) * s.C;
    const auto x = inputs(s, s.C), w = test::random_vector(s.C, 1, 0.5f, 1.5f),
               dy = test::random_vector(n, 3), dx0 = test::random_vector(n, 4),
               dw0 = test::random_vector(s.C, 5), db0 = test::random_vector(s.C, 6);
    const auto xd = test::to_double(x), wd = test::to_double(w), dyd = test::to_double(dy);
    std::vector<double> y(n), mean(s.N), rstd(s.N), zero(s.C, 0.0);
    ref::layernorm_forward(xd.data(), wd.data(), zero.data(), y.data(), mean.data(),
                           rstd.data(), s.N, s.C);
    // The backward kernels get the reference's statistics: tested apart from the forward.
    vk::Buffer bx = test::to_device(dev, x, "x"), bw = test::to_device(dev, w, "weight"),
               bmean = test::to_device(dev, test::to_float(mean), "mean"),
               brstd = test::to_device(dev, test::to_float(rstd), "rstd"),
               bdy = test::to_device(dev, dy, "dy"), bdx = test::to_device(dev, dx0, "dx"),
               bdw = test::to_device(dev, dw0, "dweight"), bdb = test::to_device(dev, db0, "dbias");
    // The same gradient from dx0 as a residual branch's, into a dx whose contents are not read.
    vk::Buffer residual = test::to_device(dev, dx0, "residual"),
               rdx = test::to_device(dev, test::random_vector(n, 7), "dx from the residual");
    vk::Commands cmd(dev, "layernorm backward");
    ops::layernorm_backward_data(cmd, bdy, bx, bw, bmean, brstd, bdx, s.N, s.C);
    ops::layernorm_backward_data(cmd, bdy, bx, bw, bmean, brstd, rdx, s.N, s.C, ops::Precision::Fp32,
                                 ops::Precision::Fp32, {.residual = vk::View(residual)});
    ops::layernorm_backward_weight(cmd, bdy, bx, bmean, brstd, bdw, bdb, s.N, s.C);
    cmd.run();
    auto dx = test::to_double(dx0), dw = test::to_double(dw0), db = test::to_double(db0);
    ref::layernorm_backward_data(dyd.data(), xd.data(), wd.data(), mean.data(), rstd.data(),
                                 dx.data(), s.N, s.C);
    ref::layernorm_backward_weight(dyd.data(), xd.data(), mean.data(), rstd.data(), dw.data(),
                                   db.data(), s.N, s.C);
    test::check_close(test::to_host(bdx), test::to_float(dx), 1e-5, 1e-5, "dx " + name(s));
    CHECK_MESSAGE(test::to_host(rdx) == test::to_host(bdx), "dx from the residual, ", name(s));
    test::check_close(test::to_host(bdw), test::to_float(dw), 1e-5, 1e-5, "dweight " + name(s));
    test::check_close(test::to_host(bdb), test::to_float(db), 1e-5, 1e-5, "dbias " + name(s));
    // The parameter gradients again with 3 lanes down each channel (rows left over) and with
    // 64 (GPUs' choice), whichever the device chose above.
    for (uint32_t lanes : {3u, 64u}) {
      vk::Buffer ldw = test::to_device(dev, dw0, "dweight"), ldb = test::to_device(dev, db0, "dbias");
      vk::Commands again(dev, "layernorm backward weight");
      ops::layernorm_backward_weight(again, bdy, bx, bmean, brstd, ldw, ldb, s.N, s.C, lanes);
      again.run();
      const std::string what = name(s) + ", " + std::to_string(lanes) + " lanes";
      test::check_close(test::to_host(ldw), test::to_float(dw), 1e-5, 1e-5, "dweight " + what);
      test::check_close(test::to_host(ldb), test::to_float(db), 1e-5, 1e-5, "dbias " + what);
    }
  }
}

TEST_CASE("layernorm reference backward agrees with finite differences") {
  const uint32_t N = 3, C = 7;
  const auto x = test::to_double(test::random_vector(N * C, 1, -2.0f, 2.0f));
  const auto w = test::to_double(test::random_vector(C, 2, 0.5f, 1.5f));
  const auto b = test::to_double(test::random_vector(C, 3));
  const auto r = test::to_double(test::random_vector(N * C, 4));
  // loss(x, w, b) = sum(y * r)
  auto loss = [&](const std::vector<double>& xv, const std::vector<double>& wv,
                  const std::vector<double>& bv) {
    std::vector<double> y(N * C), mean(N), rstd(N);
    ref::layernorm_forward(xv.data(), wv.data(), bv.data(), y.data(), mean.data(), rstd.data(), N, C);
    return test::dot(y, r);
  };
  std::vector<double> y(N * C), mean(N), rstd(N), dx(N * C, 0.0), dw(C, 0.0), db(C, 0.0);
  ref::layernorm_forward(x.data(), w.data(), b.data(), y.data(), mean.data(), rstd.data(), N, C);
  ref::layernorm_backward_data(r.data(), x.data(), w.data(), mean.data(), rstd.data(), dx.data(), N, C);
  ref::layernorm_backward_weight(r.data(), x.data(), mean.data(), rstd.data(), dw.data(), db.data(), N, C);
  test::check_gradient([&](const std::vector<double>& v) { return loss(v, w, b); }, x, dx, 1e-5,
                       1e-6, "layernorm dx");
  test::check_gradient([&](const std::vector<double>& v) { return loss(x, v, b); }, w, dw, 1e-5,
                       1e-6, "layernorm dweight");
  test::check_gradient([&](const std::vector<double>& v) { return loss(x, w, v); }, b, db, 1e-5,
                       1e-6, "layernorm dbias");
}

}  // namespace kernels_layernorm_test
