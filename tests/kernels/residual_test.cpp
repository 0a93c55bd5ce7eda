#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "check.h"
#include "gpu.h"
#include "ops/residual.h"
#include "ref/residual.h"
#include "vk/commands.h"

namespace kernels_residual_test {

using namespace brigade;

namespace {
// Odd lengths one element at a time; 256 and 4096 four elements an invocation (vec4).
const uint32_t kSizes[] = {1, 255, 256, 257, 3001, 4096};
}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "residual forward adds its two inputs") {
  vk::Device& dev = device();
  for (uint32_t n : kSizes) {
    const auto a = test::random_vector(n, n), b = test::random_vector(n, n + 1);
    vk::Buffer ba = test::to_device(dev, a, "a"), bb = test::to_device(dev, b, "b"),
               by = test::zeros(dev, n, "y");
    vk::Commands cmd(dev, "residual");
    ops::residual_forward(cmd, ba, bb, by, n);
    cmd.run();
    std::vector<float> want(n);
    ref::residual_forward(a.data(), b.data(), want.data(), n);
    test::check_close(test::to_host(by), want, 0.0, 0.0, "a + b n=" + std::to_string(n));
  }
}

TEST_CASE("residual reference backward agrees with finite differences") {
  const uint32_t n = 20;
  const auto ab = test::to_double(test::random_vector(2 * n, 1));  // a then b
  const auto r = test::to_double(test::random_vector(n, 2));
  auto loss = [&](const std::vector<double>& v) {
    std::vector<double> y(n);
    ref::residual_forward(v.data(), v.data() + n, y.data(), n);
    double s = 0;
    for (uint32_t i = 0; i < n; ++i) s += y[i] * r[i];
    return s;
  };
  std::vector<double> grad(2 * n, 0.0);
  ref::residual_backward(r.data(), grad.data(), grad.data() + n, n);
  test::check_gradient(loss, ab, grad, 1e-6, 1e-8, "d(a, b)");
}

}  // namespace kernels_residual_test
