// Conv2d and MaxPool2d on the GPU against the CPU references of engine/ref.
#include <doctest/doctest.h>

#include "check.h"
#include "gpu.h"
#include "harness.h"
#include "model/layers.h"
#include "ref/conv2d.h"
#include "ref/maxpool2d.h"

namespace model_conv_test {

using namespace brigade;

namespace {

constexpr double kAtol = 1e-5, kRtol = 1e-4;

void check(std::span<const float> got, const std::vector<double>& want, const std::string& what) {
  test::check_close(got, test::to_float(want), kAtol, kRtol, what);
}

void check_conv(vk::Device& dev, uint32_t stride, uint32_t padding, bool bias) {
  const uint32_t rows = 3;
  const model::Conv2d layer({3, 7, 9}, 3, 4, 3, stride, padding, bias, "0.");
  const ops::Conv2dShape s{rows, 3, 7, 9, 4, 3, 3, stride, stride, padding, padding};
  CHECK(layer.output_shape() == model::Shape{4, s.out_h(), s.out_w()});
  const test::LayerData d = test::random_data(layer, rows, 4);
  test::LayerRun run(dev, layer, rows, d);
  run.forward();
  run.backward();

  const auto x = test::to_double(d.x), w = test::to_double(d.params[0]), dy = test::to_double(d.dy);
  const std::vector<double> b = bias ? test::to_double(d.params[1]) : std::vector<double>{};
  std::vector<double> y(s.y_size()), dx = test::to_double(d.dx), dw = test::to_double(d.grads[0]);
  std::vector<double> db = bias ? test::to_double(d.grads[1]) : std::vector<double>{};
  ref::conv2d_forward<double>(x, w, b, y, s);
  ref::conv2d_backward_data<double>(dy, w, dx, s);
  ref::conv2d_backward_weight<double>(dy, x, dw, db, s);
  const std::string what = "conv2d stride " + std::to_string(stride) + " padding " +
                           std::to_string(padding) + (bias ? "" : " no bias");
  check(run.y(), y, what + " y");
  check(run.dx(), dx, what + " dx");
  check(run.grad(0), dw, what + " dweight");
  if (bias) check(run.grad(1), db, what + " dbias");
  run.check_guards();
}

void check_pool(vk::Device& dev, uint32_t k, uint32_t stride) {
  const uint32_t rows = 3;
  const model::MaxPool2d layer({3, 7, 9}, k, stride);
  const ops::MaxPool2dShape s{rows, 3, 7, 9, k, stride};
  CHECK(layer.output_shape() == model::Shape{3, s.out_h(), s.out_w()});
  const test::LayerData d = test::random_data(layer, rows, 5);
  test::LayerRun run(dev, layer, rows, d);
  run.forward();
  run.backward();
  const auto x = test::to_double(d.x), dy = test::to_double(d.dy);
  std::vector<double> y(s.y_size()), dx = test::to_double(d.dx);
  ref::maxpool2d_forward<double>(x, y, s);
  ref::maxpool2d_backward_data<double>(x, dy, dx, s);
  const std::string what = "maxpool2d k " + std::to_string(k) + " stride " + std::to_string(stride);
  check(run.y(), y, what + " y");
  check(run.dx(), dx, what + " dx");
  run.check_guards();
}

}  // namespace

TEST_CASE("conv2d declares PyTorch's parameters and checks its input") {
  const model::Conv2d layer({32, 14, 14}, 32, 64, 3, 1, 1, true, "3.");
  CHECK(layer.output_shape() == model::Shape{64, 14, 14});
  const auto p = layer.params();
  REQUIRE(p.size() == 2);
  CHECK(p[0].name == "3.weight");
  CHECK(p[0].shape == std::vector<int64_t>{64, 32, 3, 3});
  CHECK(p[0].scale == doctest::Approx(1 / std::sqrt(288.0)));
  CHECK(p[1].name == "3.bias");
  CHECK(layer.cost().flops == 2.0 * 64 * 14 * 14 * 32 * 9);
  CHECK_THROWS_WITH_AS(model::Conv2d({3, 28, 28}, 1, 8, 3, 1, 1, true, "0."),
                       doctest::Contains("in_channels 1 does not match the incoming shape [3, 28, 28]"),
                       UserError);
  CHECK_THROWS_AS(model::Conv2d({1, 2, 2}, 1, 8, 5, 1, 0, true, "0."), UserError);
}

TEST_CASE_FIXTURE(test::Gpu, "conv2d forward and backward match the reference") {
  check_conv(device(), 1, 1, true);
  check_conv(device(), 2, 1, true);
  check_conv(device(), 2, 0, false);
}

TEST_CASE_FIXTURE(test::Gpu, "maxpool2d forward and backward match the reference") {
  check_pool(device(), 2, 2);
  check_pool(device(), 3, 2);  // overlapping windows
}

TEST_CASE_FIXTURE(test::Gpu, "conv2d's split backward (input gradient, then parameter gradients) equals its whole backward") {
  const uint32_t rows = 3;
  for (bool bias : {true, false}) {
    CAPTURE(bias);
    const model::Conv2d layer({3, 7, 9}, 3, 4, 3, 2, 1, bias, "0.");
    const auto deferred = layer.deferred();
    REQUIRE(deferred.size() == 1);
    CHECK(deferred[0].floats(rows) == rows * model::elements(layer.output_shape()));
    test::check_split_backward(device(), layer, rows, test::random_data(layer, rows, 22));
  }
}

}  // namespace model_conv_test
