#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "check.h"
#include "shaders/elementwise.h"
#include "gpu.h"
#include "ops/activation.h"
#include "ref/activation.h"
#include "vk/commands.h"

namespace kernels_activation_test {

using namespace brigade;

namespace {

// Sizes around the workgroup size (256), and ones that leave a ragged last workgroup;
// multiples of 4 take the four-per-invocation kernels where a kernel has them.
const uint32_t kSizes[] = {1, 7, 255, 256, 257, 4099, 4100};

// Values in [-4, 4) none of which is within 0.05 of 0, so a finite difference never
// straddles ReLU's kink.
std::vector<float> away_from_zero(size_t n, uint32_t seed) {
  auto v = test::random_vector(n, seed, -4.0f, 4.0f);
  for (float& x : v)
    if (std::abs(x) < 0.05f) x = x < 0 ? x - 0.05f : x + 0.05f;
  return v;
}

// GELU inputs: random values plus magnitudes where a naive tanh overflows.
std::vector<float> gelu_inputs(uint32_t n, uint32_t seed) {
  auto x = test::random_vector(n, seed, -6.0f, 6.0f);
  const float extremes[] = {-100.0f, 100.0f, -30.0f, 30.0f, 0.0f, -1e-4f, 1e-4f};
  for (uint32_t i = 0; i < n && i < std::size(extremes); ++i) x[i] = extremes[i];
  return x;
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "relu forward matches the CPU reference at sizes off the workgroup size") {
  vk::Device& dev = device();
  for (uint32_t n : kSizes) {
    const auto x = test::random_vector(n, n, -2.0f, 2.0f);
    vk::Buffer bx = test::to_device(dev, x, "x"), by = test::zeros(dev, n, "y");
    vk::Commands cmd(dev, "relu");
    ops::relu_forward(cmd, bx, by, n);
    cmd.run();
    std::vector<float> want(n);
    ref::relu_forward(x.data(), want.data(), n);
    test::check_close(test::to_host(by), want, 0.0, 0.0, "relu n=" + std::to_string(n));
  }
}

TEST_CASE_FIXTURE(test::Gpu, "relu passes a NaN through as PyTorch does, on both paths, and keeps the sign of zero") {
  // torch.relu(nan) is nan: a driver that compiles the select into a max() dropping NaN
  // operands would give 0 here (relu.glsl decides on the bits). -inf gives 0, +inf and -0.0
  // stay. Sizes 8 (vec4) and 7 (one by one).
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (uint32_t n : {8u, 7u}) {
    std::vector<float> x = {nan, -nan, -inf, inf, -0.0f, 0.0f, -1.5f, 2.5f};
    x.resize(n);
    vk::Buffer bx = test::to_device(device(), x, "x"), by = test::zeros(device(), n, "y");
    vk::Commands cmd(device(), "relu special values");
    ops::relu_forward(cmd, bx, by, n);
    cmd.run();
    const std::vector<float> y = test::to_host(by);
    INFO("n=", n);
    CHECK(std::isnan(y[0]));
    CHECK(std::isnan(y[1]));
    CHECK(y[2] == 0.0f);
    CHECK(y[3] == inf);
    CHECK((y[4] == 0.0f && std::signbit(y[4])));
    CHECK((y[5] == 0.0f && !std::signbit(y[5])));
    CHECK(y[6] == 0.0f);
    if (n > 7) CHECK(y[7] == 2.5f);
  }
}

// ReLU past the real cap, 65535 workgroups; every capped kernel's loop runs in the suite's
// 2-workgroup runs (tests/CMakeLists.txt, --max-groups).
TEST_CASE_FIXTURE(test::Gpu, "relu covers a tensor of more workgroups than one dispatch may launch") {
  vk::Device& dev = device();
  const uint32_t n = BRIGADE_MAX_GROUPS_X * BRIGADE_WG_ELEMENTWISE + 1001;
  const auto x = test::random_vector(n, 3, -1.0f, 1.0f);
  vk::Buffer bx = test::to_device(dev, x, "x"), by = test::zeros(dev, n, "y");
  vk::Commands cmd(dev, "relu");
  ops::relu_forward(cmd, bx, by, n);
  cmd.run();
  std::vector<float> want(n);
  ref::relu_forward(x.data(), want.data(), n);
  test::check_close(test::to_host(by), want, 0.0, 0.0, "relu over 2^24 + elements");
}

TEST_CASE_FIXTURE(test::Gpu, "relu backward passes the gradient where the output was positive and writes zero elsewhere") {
  vk::Device& dev = device();
  for (uint32_t n : kSizes) {
    const auto x = test::random_vector(n, n, -2.0f, 2.0f);
    const auto dy = test::random_vector(n, n + 1), dx0 = test::random_vector(n, n + 2);
    std::vector<float> y(n);
    ref::relu_forward(x.data(), y.data(), n);
    vk::Buffer by = test::to_device(dev, y, "y"), bdy = test::to_device(dev, dy, "dy"),
               bdx = test::to_device(dev, dx0, "dx");
    vk::Commands cmd(dev, "relu backward");
    ops::relu_backward(cmd, by, bdy, bdx, n);
    cmd.run();
    auto want = dx0;
    ref::relu_backward(y.data(), dy.data(), want.data(), n);
    test::check_close(test::to_host(bdx), want, 0.0, 0.0, "relu dx n=" + std::to_string(n));
  }
}

TEST_CASE("relu reference backward agrees with finite differences") {
  const uint32_t n = 40;
  const auto x = test::to_double(away_from_zero(n, 1));
  const auto r = test::to_double(test::random_vector(n, 2));
  auto loss = [&](const std::vector<double>& v) {
    std::vector<double> y(n);
    ref::relu_forward(v.data(), y.data(), n);
    return test::dot(y, r);
  };
  std::vector<double> y(n), dx(n, 0.0);
  ref::relu_forward(x.data(), y.data(), n);
  ref::relu_backward(y.data(), r.data(), dx.data(), n);
  test::check_gradient(loss, x, dx, 1e-6, 1e-7, "relu dx");
}

TEST_CASE_FIXTURE(test::Gpu, "gelu forward matches the tanh approximation including large magnitudes") {
  vk::Device& dev = device();
  for (uint32_t n : kSizes) {
    const auto x = gelu_inputs(n, n);
    vk::Buffer bx = test::to_device(dev, x, "x"), by = test::zeros(dev, n, "y");
    vk::Commands cmd(dev, "gelu");
    ops::gelu_forward(cmd, bx, by, n);
    cmd.run();
    const auto xd = test::to_double(x);
    std::vector<double> want(n);
    ref::gelu_forward(xd.data(), want.data(), n);
    test::check_close(test::to_host(by), test::to_float(want), 1e-6, 1e-5,
                      "gelu n=" + std::to_string(n));
  }
}

TEST_CASE_FIXTURE(test::Gpu, "gelu backward accumulates dy times the derivative of the tanh approximation") {
  vk::Device& dev = device();
  for (uint32_t n : kSizes) {
    const auto x = gelu_inputs(n, n);
    const auto dy = test::random_vector(n, n + 1), dx0 = test::random_vector(n, n + 2);
    vk::Buffer bx = test::to_device(dev, x, "x"), bdy = test::to_device(dev, dy, "dy"),
               bdx = test::to_device(dev, dx0, "dx");
    vk::Commands cmd(dev, "gelu backward");
    ops::gelu_backward(cmd, bx, bdy, bdx, n);
    cmd.run();
    const auto xd = test::to_double(x), dyd = test::to_double(dy);
    auto want = test::to_double(dx0);
    ref::gelu_backward(xd.data(), dyd.data(), want.data(), n);
    test::check_close(test::to_host(bdx), test::to_float(want), 1e-6, 1e-5,
                      "gelu dx n=" + std::to_string(n));
  }
}

TEST_CASE("gelu reference backward agrees with finite differences") {
  const uint32_t n = 40;
  const auto x = test::to_double(test::random_vector(n, 5, -5.0f, 5.0f));
  const auto r = test::to_double(test::random_vector(n, 6));
  auto loss = [&](const std::vector<double>& v) {
    std::vector<double> y(n);
    ref::gelu_forward(v.data(), y.data(), n);
    return test::dot(y, r);
  };
  std::vector<double> dx(n, 0.0);
  ref::gelu_backward(x.data(), r.data(), dx.data(), n);
  test::check_gradient(loss, x, dx, 1e-6, 1e-7, "gelu dx");
}

}  // namespace kernels_activation_test
