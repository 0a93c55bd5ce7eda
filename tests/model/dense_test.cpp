// Flatten, Linear, ReLU and GELU on the GPU against the CPU references of engine/ref.
#include <doctest/doctest.h>

#include "check.h"
#include "gpu.h"
#include "harness.h"
#include "model/layers.h"
#include "ref/activation.h"
#include "ref/linear.h"

namespace model_dense_test {

using namespace brigade;

namespace {

constexpr double kAtol = 1e-5, kRtol = 1e-4;

void check(std::span<const float> got, const std::vector<double>& want, const std::string& what) {
  test::check_close(got, test::to_float(want), kAtol, kRtol, what);
}

void check_linear(vk::Device& dev, bool bias) {
  const uint32_t rows = 3, in = 5, out = 7;
  const model::Linear layer({2, in}, in, out, bias, "4.");
  CHECK(layer.output_shape() == model::Shape{2, out});
  const test::LayerData d = test::random_data(layer, rows, 1);
  test::LayerRun run(dev, layer, rows, d);
  run.forward();
  run.backward();

  const uint32_t n = rows * 2;
  const auto x = test::to_double(d.x), w = test::to_double(d.params[0]), dy = test::to_double(d.dy);
  const std::vector<double> b = bias ? test::to_double(d.params[1]) : std::vector<double>{};
  std::vector<double> y(n * out), dx = test::to_double(d.dx), dw = test::to_double(d.grads[0]);
  std::vector<double> db = bias ? test::to_double(d.grads[1]) : std::vector<double>{};
  ref::linear_forward<double>(x, w, b, y, n, in, out);
  ref::linear_backward_data<double>(dy, w, dx, n, in, out);
  ref::linear_backward_weight<double>(dy, x, dw, db, n, in, out);
  check(run.y(), y, "linear y");
  check(run.dx(), dx, "linear dx");
  check(run.grad(0), dw, "linear dweight");
  if (bias) check(run.grad(1), db, "linear dbias");
  run.check_guards();
}

}  // namespace

TEST_CASE("flatten is a view with no parameters") {
  const model::Flatten layer({3, 5, 7});
  CHECK(layer.is_view());
  CHECK(layer.output_shape() == model::Shape{105});
  CHECK(layer.params().empty());
  CHECK(layer.cost().activation_bytes == 0);
}

TEST_CASE_FIXTURE(test::Gpu, "flatten records no work") {
  const model::Flatten layer({3, 5, 7});
  test::LayerRun run(device(), layer, 2, test::random_data(layer, 2, 1));
  run.forward();
  CHECK(run.dispatches() == 0);
  run.backward();
  CHECK(run.dispatches() == 0);
}

TEST_CASE("linear declares PyTorch's parameters and checks its input") {
  const model::Linear layer({784}, 784, 256, true, "1.");
  const auto p = layer.params();
  REQUIRE(p.size() == 2);
  CHECK(p[0].name == "1.weight");
  CHECK(p[0].shape == std::vector<int64_t>{256, 784});
  CHECK(p[0].init == model::Init::Uniform);
  CHECK(p[0].scale == doctest::Approx(1 / 28.0));
  CHECK(p[1].name == "1.bias");
  CHECK(p[1].shape == std::vector<int64_t>{256});
  CHECK(layer.cost().flops == 2.0 * 784 * 256);
  CHECK(layer.cost().param_bytes == (784 * 256 + 256) * 4);
  CHECK(layer.cost().activation_bytes == 256 * 4);
  CHECK(model::Linear({7}, 7, 3, false, "0.").params().size() == 1);
  CHECK_THROWS_WITH_AS(model::Linear({780}, 784, 10, true, "1."),
                       doctest::Contains("in_features 784 does not match the incoming shape [780]"),
                       UserError);
}

TEST_CASE_FIXTURE(test::Gpu, "linear forward and backward match the reference") {
  check_linear(device(), true);
}

TEST_CASE_FIXTURE(test::Gpu, "linear without bias forward and backward match the reference") {
  check_linear(device(), false);
}

TEST_CASE_FIXTURE(test::Gpu, "relu forward and backward match the reference") {
  const uint32_t rows = 3;
  const model::ReLU layer({2, 3, 5});
  const test::LayerData d = test::random_data(layer, rows, 2);
  test::LayerRun run(device(), layer, rows, d);
  run.forward();
  run.backward();
  const uint32_t n = rows * 30;
  const auto x = test::to_double(d.x), dy = test::to_double(d.dy);
  std::vector<double> y(n), dx = test::to_double(d.dx);
  ref::relu_forward(x.data(), y.data(), n);
  ref::relu_backward(y.data(), dy.data(), dx.data(), n);
  check(run.y(), y, "relu y");
  check(run.dx(), dx, "relu dx");
  run.check_guards();
}

TEST_CASE_FIXTURE(test::Gpu, "gelu forward and backward match the reference") {
  const uint32_t rows = 3;
  const model::GELU layer({13});
  const test::LayerData d = test::random_data(layer, rows, 3);
  test::LayerRun run(device(), layer, rows, d);
  run.forward();
  run.backward();
  const uint32_t n = rows * 13;
  const auto x = test::to_double(d.x), dy = test::to_double(d.dy);
  std::vector<double> y(n), dx = test::to_double(d.dx);
  ref::gelu_forward(x.data(), y.data(), n);
  ref::gelu_backward(x.data(), dy.data(), dx.data(), n);
  check(run.y(), y, "gelu y");
  check(run.dx(), dx, "gelu dx");
  run.check_guards();
}

TEST_CASE_FIXTURE(test::Gpu, "linear's split backward (input gradient, then parameter gradients) equals its whole backward") {
  const uint32_t rows = 3, in = 5, out = 7;
  for (bool bias : {true, false}) {
    CAPTURE(bias);
    const model::Linear layer({2, in}, in, out, bias, "4.");
    const auto deferred = layer.deferred();
    REQUIRE(deferred.size() == 1);
    CHECK(deferred[0].floats(rows) == rows * 2 * out);
    test::LayerData d = test::random_data(layer, rows, 21);
    test::check_split_backward(device(), layer, rows, d);
    d.dx.clear();  // the model's first layer
    test::check_split_backward(device(), layer, rows, d);
  }
}

TEST_CASE("layers without a split backward declare nothing to defer") {
  CHECK(model::Flatten({3, 5, 7}).deferred().empty());
  CHECK(model::ReLU({5}).deferred().empty());
  CHECK(model::GELU({5}).deferred().empty());
  CHECK(model::MaxPool2d({3, 8, 8}, 2, 2).deferred().empty());
  CHECK(model::BatchNorm2d({3, 8, 8}, 3, "1.").deferred().empty());
  CHECK(model::Embedding(11, 9, 7, 6).deferred().empty());
}

}  // namespace model_dense_test
