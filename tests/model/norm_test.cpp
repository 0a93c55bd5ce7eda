// BatchNorm2d and LayerNorm on the GPU against the CPU references of engine/ref.
#include <doctest/doctest.h>

#include "check.h"
#include "gpu.h"
#include "harness.h"
#include "model/layers.h"
#include "ref/batchnorm.h"
#include "ref/layernorm.h"

namespace model_norm_test {

using namespace brigade;

namespace {

constexpr double kAtol = 1e-5, kRtol = 1e-4;

void check(std::span<const float> got, const std::vector<double>& want, const std::string& what) {
  test::check_close(got, test::to_float(want), kAtol, kRtol, what);
}

constexpr uint32_t kC = 3, kH = 5, kW = 7, kHW = kH * kW;

// BatchNorm2d data: positive running variance, an empty statistics accumulator.
test::LayerData batchnorm_data(const model::Layer& layer, uint32_t rows, uint32_t seed) {
  test::LayerData d = test::random_data(layer, rows, seed);
  d.params[0] = test::random_vector(kC, seed + 10, 0.5f, 1.5f);
  d.params[3] = test::random_vector(kC, seed + 11, 0.5f, 2.0f);
  d.params[4].assign(d.params[4].size(), 0.0f);
  return d;
}

}  // namespace

TEST_CASE("batchnorm2d declares PyTorch's parameters, buffers and its accumulator") {
  const model::BatchNorm2d layer({32, 28, 28}, 32, "1.");
  const auto p = layer.params();
  REQUIRE(p.size() == 5);
  const char* names[] = {"1.weight", "1.bias", "1.running_mean", "1.running_var", "1.stats"};
  const model::ParamKind kinds[] = {model::ParamKind::Trainable, model::ParamKind::Trainable,
                                    model::ParamKind::Buffer, model::ParamKind::Buffer,
                                    model::ParamKind::State};
  const model::Init inits[] = {model::Init::Ones, model::Init::Zeros, model::Init::Zeros,
                               model::Init::Ones, model::Init::Zeros};
  for (size_t i = 0; i < 5; ++i) {
    CHECK(p[i].name == names[i]);
    CHECK(p[i].kind == kinds[i]);
    CHECK(p[i].init == inits[i]);
  }
  CHECK(p[4].elements() == 3 * 32);
  const auto s = layer.saved();
  REQUIRE(s.size() == 2);
  CHECK(s[0].floats(8) == 32);
  CHECK(s[1].floats(8) == 32);
  CHECK_THROWS_AS(model::BatchNorm2d({16, 28, 28}, 32, "1."), UserError);
}

TEST_CASE_FIXTURE(test::Gpu, "batchnorm2d training forward and backward match the reference") {
  const uint32_t rows = 3;
  const model::BatchNorm2d layer({kC, kH, kW}, kC, "1.");
  const test::LayerData d = batchnorm_data(layer, rows, 6);
  test::LayerRun run(device(), layer, rows, d);
  run.forward();
  run.backward();
  const auto x = test::to_double(d.x), w = test::to_double(d.params[0]),
             b = test::to_double(d.params[1]), dy = test::to_double(d.dy);
  std::vector<double> y(x.size()), mean(kC), rstd(kC), dx = test::to_double(d.dx),
      dw = test::to_double(d.grads[0]), db = test::to_double(d.grads[1]);
  ref::batchnorm_forward_train(x.data(), w.data(), b.data(), y.data(), mean.data(), rstd.data(),
                               rows, kC, kHW);
  ref::batchnorm_backward(dy.data(), x.data(), w.data(), mean.data(), rstd.data(), dx.data(),
                          dw.data(), db.data(), rows, kC, kHW);
  check(run.y(), y, "batchnorm2d y");
  check(run.saved(0), mean, "batchnorm2d saved mean");
  check(run.saved(1), rstd, "batchnorm2d saved rstd");
  check(run.dx(), dx, "batchnorm2d dx");
  check(run.grad(0), dw, "batchnorm2d dweight");
  check(run.grad(1), db, "batchnorm2d dbias");
  run.check_guards();
}

TEST_CASE_FIXTURE(test::Gpu, "batchnorm2d evaluation forward normalizes with the running statistics") {
  const uint32_t rows = 2;
  const model::BatchNorm2d layer({kC, kH, kW}, kC, "1.");
  const test::LayerData d = batchnorm_data(layer, rows, 7);
  test::LayerRun run(device(), layer, rows, d);
  run.forward(false);
  const auto x = test::to_double(d.x), w = test::to_double(d.params[0]),
             b = test::to_double(d.params[1]), rm = test::to_double(d.params[2]),
             rv = test::to_double(d.params[3]);
  std::vector<double> y(x.size());
  ref::batchnorm_forward_eval(x.data(), w.data(), b.data(), rm.data(), rv.data(), y.data(), rows,
                              kC, kHW);
  check(run.y(), y, "batchnorm2d eval y");
  CHECK(run.param(4) == d.params[4]);  // evaluation leaves the accumulator alone
  run.check_guards();
}

TEST_CASE_FIXTURE(test::Gpu, "batchnorm2d recomputed forwards leave the statistics alone and end_minibatch moves the running statistics") {
  const uint32_t rows = 3;
  const model::BatchNorm2d layer({kC, kH, kW}, kC, "1.");
  const test::LayerData d = batchnorm_data(layer, rows, 8);
  const std::vector<float> x1 = d.x, x2 = test::random_vector(d.x.size(), 9, 1.0f, 3.0f);
  test::LayerRun run(device(), layer, rows, d);
  run.forward();
  run.set_input(x2);
  run.forward();
  const std::vector<float> stats = run.param(4);
  CHECK(stats != d.params[4]);
  run.set_input(x1);
  run.forward(true, true);  // re-materialization recomputes the first micro-batch
  CHECK(run.param(4) == stats);
  run.end_minibatch();

  std::vector<double> whole = test::to_double(x1), rm = test::to_double(d.params[2]),
                      rv = test::to_double(d.params[3]);
  const auto second = test::to_double(x2);
  whole.insert(whole.end(), second.begin(), second.end());
  ref::batchnorm_update_running(whole.data(), rm.data(), rv.data(), 2 * rows, kC, kHW);
  check(run.param(2), rm, "running_mean");
  check(run.param(3), rv, "running_var");
  run.check_guards();
}

TEST_CASE_FIXTURE(test::Gpu, "layernorm forward and backward match the reference") {
  const uint32_t rows = 3, T = 5, C = 6, n = rows * T;
  const model::LayerNorm layer({T, C}, C, "transformer.ln_f.");
  CHECK(layer.params()[0].name == "transformer.ln_f.weight");
  CHECK(layer.params()[1].name == "transformer.ln_f.bias");
  const test::LayerData d = test::random_data(layer, rows, 10);
  test::LayerRun run(device(), layer, rows, d);
  run.forward();
  run.backward();
  const auto x = test::to_double(d.x), w = test::to_double(d.params[0]),
             b = test::to_double(d.params[1]), dy = test::to_double(d.dy);
  std::vector<double> y(x.size()), mean(n), rstd(n), dx = test::to_double(d.dx),
      dw = test::to_double(d.grads[0]), db = test::to_double(d.grads[1]);
  ref::layernorm_forward(x.data(), w.data(), b.data(), y.data(), mean.data(), rstd.data(), n, C);
  ref::layernorm_backward_data(dy.data(), x.data(), w.data(), mean.data(), rstd.data(), dx.data(),
                               n, C);
  ref::layernorm_backward_weight(dy.data(), x.data(), mean.data(), rstd.data(), dw.data(),
                                 db.data(), n, C);
  check(run.y(), y, "layernorm y");
  check(run.dx(), dx, "layernorm dx");
  check(run.grad(0), dw, "layernorm dweight");
  check(run.grad(1), db, "layernorm dbias");
  run.check_guards();
}

TEST_CASE_FIXTURE(test::Gpu, "layernorm's split backward (input gradient, then parameter gradients) equals its whole backward") {
  const uint32_t rows = 3, T = 5, C = 6;
  const model::LayerNorm layer({T, C}, C, "transformer.ln_f.");
  const auto deferred = layer.deferred();
  REQUIRE(deferred.size() == 1);
  CHECK(deferred[0].floats(rows) == rows * T * C);
  test::check_split_backward(device(), layer, rows, test::random_data(layer, rows, 23));
}

}  // namespace model_norm_test
