#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "check.h"
#include "gpu.h"
#include "ops/maxpool2d.h"
#include "ref/maxpool2d.h"
#include "vk/commands.h"

namespace kernels_maxpool2d_test {

using namespace brigade;
using ops::MaxPool2dShape;

namespace {

std::string describe(const MaxPool2dShape& s) {
  std::ostringstream o;
  o << "N" << s.n << " C" << s.c << " H" << s.h << " W" << s.w << " k" << s.k << " s" << s.s;
  return o.str();
}

// The fashion-cnn pools (28 -> 14, two windows an invocation; 14 -> 7, one; and 7 -> 3
// where the last row and column are dropped), two windows an invocation on an odd number of
// rows, odd sizes, overlapping windows (s < k), gaps (s > k) and a window as large as the
// input.
const std::vector<MaxPool2dShape> kShapes = {
    {.n = 2, .c = 3, .h = 28, .w = 28, .k = 2, .s = 2}, {.n = 1, .c = 3, .h = 14, .w = 14, .k = 2, .s = 2},
    {.n = 3, .c = 1, .h = 10, .w = 12, .k = 2, .s = 2}, {.n = 3, .c = 2, .h = 7, .w = 7, .k = 2, .s = 2},
    {.n = 1, .c = 4, .h = 14, .w = 15, .k = 2, .s = 2}, {.n = 2, .c = 2, .h = 9, .w = 8, .k = 3, .s = 2},
    {.n = 1, .c = 3, .h = 10, .w = 7, .k = 3, .s = 1}, {.n = 2, .c = 1, .h = 7, .w = 9, .k = 2, .s = 3},
    {.n = 1, .c = 2, .h = 5, .w = 5, .k = 5, .s = 5},
};

// Values drawn from {0, 1, 2}: most windows hold ties.
std::vector<float> with_ties(size_t n, uint32_t seed) {
  auto v = test::random_vector(n, seed, 0.0f, 3.0f);
  for (auto& x : v) x = std::floor(x);
  return v;
}

std::vector<float> gpu_forward(vk::Device& dev, const std::vector<float>& x, const MaxPool2dShape& s) {
  auto bx = test::to_device(dev, x, "x"), by = test::zeros(dev, s.y_size(), "y");
  vk::Commands cmd(dev, "maxpool2d forward");
  ops::maxpool2d_forward(cmd, bx, by, s);
  cmd.run();
  return test::to_host(by);
}

std::vector<float> gpu_backward(vk::Device& dev, const std::vector<float>& x,
                                const std::vector<float>& dy, const std::vector<float>& dx0,
                                const MaxPool2dShape& s) {
  auto bx = test::to_device(dev, x, "x"), bdy = test::to_device(dev, dy, "dy");
  auto bdx = test::to_device(dev, dx0, "dx");
  vk::Commands cmd(dev, "maxpool2d backward-data");
  ops::maxpool2d_backward_data(cmd, bx, bdy, bdx, s);
  cmd.run();
  return test::to_host(bdx);
}

std::vector<float> cpu_forward(const std::vector<float>& x, const MaxPool2dShape& s) {
  std::vector<float> y(s.y_size());
  ref::maxpool2d_forward<float>(x, y, s);
  return y;
}

std::vector<float> cpu_backward(const std::vector<float>& x, const std::vector<float>& dy,
                                std::vector<float> dx, const MaxPool2dShape& s) {
  ref::maxpool2d_backward_data<float>(x, dy, dx, s);
  return dx;
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "maxpool2d forward picks the window maxima exactly with ties and odd sizes") {
  uint32_t seed = 1;
  for (const auto& s : kShapes)
    for (bool ties : {true, false}) {
      const auto x = ties ? with_ties(s.x_size(), ++seed) : test::random_vector(s.x_size(), ++seed);
      test::check_close(gpu_forward(device(), x, s), cpu_forward(x, s), 0, 0,
                        "maxpool2d forward " + describe(s) + (ties ? " ties" : ""));
    }
}

TEST_CASE_FIXTURE(test::Gpu, "maxpool2d backward writes each window gradient to its first maximum and zero elsewhere") {
  uint32_t seed = 50;
  for (const auto& s : kShapes)
    for (bool ties : {true, false}) {
      const auto x = ties ? with_ties(s.x_size(), ++seed) : test::random_vector(s.x_size(), ++seed);
      const auto dy = test::random_vector(s.y_size(), ++seed);
      // What dx held before is overwritten, zeros included.
      const auto dx0 = test::random_vector(s.x_size(), ++seed, 1.0f, 2.0f);
      // Overlapping windows may sum into one element in another order than the reference.
      test::check_close(gpu_backward(device(), x, dy, dx0, s), cpu_backward(x, dy, dx0, s), 1e-6,
                        1e-6, "maxpool2d backward-data " + describe(s) + (ties ? " ties" : ""));
    }
}

TEST_CASE_FIXTURE(test::Gpu, "maxpool2d breaks a tie in favour of the first element in row-major order") {
  // One 2 x 3 image, windows 2 x 2 with stride 1: [5 7 7 / 7 7 1]. Window 0 holds 5 7 / 7 7
  // and picks (0, 1); window 1 holds 7 7 / 7 1 and picks (0, 1) as well.
  const MaxPool2dShape s{.n = 1, .c = 1, .h = 2, .w = 3, .k = 2, .s = 1};
  const std::vector<float> x = {5, 7, 7, 7, 7, 1}, dy = {10, 100}, dx0 = {1, 1, 1, 1, 1, 1};
  CHECK(gpu_forward(device(), x, s) == std::vector<float>{7, 7});
  CHECK(gpu_backward(device(), x, dy, dx0, s) == std::vector<float>{0, 110, 0, 0, 0, 0});
}

TEST_CASE_FIXTURE(test::Gpu, "maxpool2d propagates a NaN as PyTorch does") {
  const MaxPool2dShape s{.n = 1, .c = 2, .h = 4, .w = 4, .k = 2, .s = 2};
  auto x = test::random_vector(s.x_size(), 7);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  x[1] = nan;                         // window (0, 0, 0): NaN after a number
  x[16] = nan, x[17] = 5, x[21] = nan;  // window (1, 0, 0): two NaNs, the last one wins
  const auto y = gpu_forward(device(), x, s);
  CHECK(std::isnan(y[0]));
  CHECK(std::isnan(y[4]));
  test::check_close(y, cpu_forward(x, s), 0, 0, "forward with NaN");
  const auto dy = test::random_vector(s.y_size(), 8), dx0 = std::vector<float>(s.x_size(), 0.0f);
  const auto dx = gpu_backward(device(), x, dy, dx0, s);
  CHECK(dx[1] == dy[0]);
  CHECK(dx[21] == dy[4]);
  CHECK(dx[16] == 0.0f);
  test::check_close(dx, cpu_backward(x, dy, dx0, s), 0, 0, "backward with NaN");
}

// More planes (N x C) than one dispatch's 65535 workgroups deep (2048 channels at batch 64):
// the grid's depth is capped and the kernels walk the planes, two windows an invocation, one,
// and one per input element (overlapping windows).
TEST_CASE_FIXTURE(test::Gpu, "maxpool2d pools more than 65535 planes, forward and backward") {
  uint32_t seed = 600;
  for (const MaxPool2dShape& s : {MaxPool2dShape{.n = 1, .c = 65537, .h = 2, .w = 4, .k = 2, .s = 2},
                                  MaxPool2dShape{.n = 3, .c = 21846, .h = 2, .w = 2, .k = 2, .s = 2},
                                  MaxPool2dShape{.n = 1, .c = 65537, .h = 3, .w = 3, .k = 2, .s = 1}}) {
    const auto x = with_ties(s.x_size(), ++seed), dy = test::random_vector(s.y_size(), ++seed);
    const auto dx0 = test::random_vector(s.x_size(), ++seed, 1.0f, 2.0f);
    test::check_close(gpu_forward(device(), x, s), cpu_forward(x, s), 0, 0, "maxpool2d forward " + describe(s));
    test::check_close(gpu_backward(device(), x, dy, dx0, s), cpu_backward(x, dy, dx0, s), 1e-6, 1e-6,
                      "maxpool2d backward-data " + describe(s));
  }
}

TEST_CASE("maxpool2d CPU backward matches finite differences of the forward") {
  // Distinct values, so no window's maximum changes within the finite-difference step.
  for (const MaxPool2dShape& s : {MaxPool2dShape{.n = 2, .c = 2, .h = 5, .w = 5, .k = 2, .s = 2},
                                  MaxPool2dShape{.n = 1, .c = 2, .h = 5, .w = 6, .k = 3, .s = 1}}) {
    const auto x = test::to_double(test::random_vector(s.x_size(), 11));
    const auto r = test::to_double(test::random_vector(s.y_size(), 12));  // loss = sum(y * r)
    auto loss = [&](const std::vector<double>& xx) {
      std::vector<double> y(s.y_size());
      ref::maxpool2d_forward<double>(xx, y, s);
      double l = 0;
      for (size_t i = 0; i < y.size(); ++i) l += y[i] * r[i];
      return l;
    };
    std::vector<double> dx(x.size());
    ref::maxpool2d_backward_data<double>(x, r, dx, s);
    test::check_gradient(loss, x, dx, 1e-7, 1e-6, "maxpool2d dx " + describe(s));
  }
}

TEST_CASE("maxpool2d refuses a window larger than the input with one clear line") {
  CHECK_THROWS_WITH_AS(ops::maxpool2d_validate(MaxPool2dShape{.h = 1, .w = 5, .k = 2, .s = 2}),
                       doctest::Contains("window is larger than the input"), UserError);
  CHECK_THROWS_AS(ops::maxpool2d_validate(MaxPool2dShape{.h = 4, .w = 4, .k = 2, .s = 0}), UserError);
}

TEST_CASE_FIXTURE(test::Gpu, "maxpool2d with a ReLU folded in is ReLU then MaxPool2d, forward and backward") {
  // The two layers apart, on the CPU: r = relu(x) (NaN passing), y = maxpool(r); backward
  // the pooling's gradient of r, then ReLU's mask r > 0. Values from {-2, ..., 2} make ties,
  // zeros and windows with nothing positive; one NaN rides along.
  uint32_t seed = 700;
  for (MaxPool2dShape s : kShapes) {
    auto x = test::random_vector(s.x_size(), ++seed, -2.0f, 3.0f);
    for (auto& v : x) v = std::floor(v);
    x[x.size() / 3] = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> r(x.size());
    for (size_t i = 0; i < x.size(); ++i) r[i] = x[i] < 0 ? 0.0f : x[i];
    const auto dy = test::random_vector(s.y_size(), ++seed);
    const auto dx0 = test::random_vector(s.x_size(), ++seed, 1.0f, 2.0f);
    const std::vector<float> y_apart = cpu_forward(r, s);
    std::vector<float> dx_apart = cpu_backward(r, dy, dx0, s);
    for (size_t i = 0; i < r.size(); ++i)
      if (!(r[i] > 0)) dx_apart[i] = 0.0f;

    s.relu = true;
    const std::string what = "relu folded " + describe(s);
    auto same = [&](const std::vector<float>& got, const std::vector<float>& want, double tol, const std::string& w) {
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        INFO(w, " element ", i, ": ", got[i], " against ", want[i]);
        CHECK((std::isnan(want[i]) ? std::isnan(got[i]) : std::abs(double(got[i]) - want[i]) <= tol));
      }
    };
    same(cpu_forward(x, s), y_apart, 0, "CPU forward " + what);
    same(cpu_backward(x, dy, dx0, s), dx_apart, 1e-6, "CPU backward " + what);
    same(gpu_forward(device(), x, s), y_apart, 0, "forward " + what);
    same(gpu_backward(device(), x, dy, dx0, s), dx_apart, 1e-6, "backward " + what);
  }
}

}  // namespace kernels_maxpool2d_test
