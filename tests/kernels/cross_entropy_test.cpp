#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "check.h"
#include "gpu.h"
#include "ops/cross_entropy.h"
#include "ref/cross_entropy.h"
#include "util/error.h"
#include "vk/commands.h"

namespace kernels_cross_entropy_test {

using namespace brigade;

namespace {

struct Shape {
  uint32_t N, V;
};
// One class (loss 0), Fashion-MNIST's 10, bytes, odd vocabularies, many rows.
const Shape kShapes[] = {{3, 1}, {5, 10}, {37, 256}, {4, 1001}, {700, 10}};

std::string name(const Shape& s) { return "N=" + std::to_string(s.N) + " V=" + std::to_string(s.V); }

std::vector<int32_t> random_targets(uint32_t N, uint32_t V, uint32_t seed) {
  const auto u = test::random_vector(N, seed, 0.0f, 1.0f);
  std::vector<int32_t> t(N);
  for (uint32_t i = 0; i < N; ++i) t[i] = std::min(int32_t(u[i] * float(V)), int32_t(V) - 1);
  return t;
}

struct Result {
  float loss;
  std::vector<float> dlogits;
};

// Forward and backward of one batch on the GPU, adding into a loss that starts at `loss0`.
// dlogits starts as garbage: the backward must overwrite it.
Result run(vk::Device& dev, const std::vector<float>& logits, const std::vector<int32_t>& targets,
           uint32_t V, uint32_t N_total, float loss0) {
  const uint32_t N = uint32_t(targets.size());
  vk::Buffer bl = test::to_device(dev, logits, "logits"), bt = test::to_device(dev, targets, "targets"),
             rows = test::zeros(dev, 2 * N, "rows"),
             loss = test::to_device(dev, std::vector<float>{loss0}, "loss"),
             dl = test::to_device(dev, test::random_vector(logits.size(), 99), "dlogits");
  vk::Commands cmd(dev, "cross-entropy");
  ops::cross_entropy_forward(cmd, bl, bt, rows, loss, N, V, N_total);
  ops::cross_entropy_backward(cmd, bl, bt, rows, dl, N, V, N_total);
  cmd.run();
  return {test::to_host(loss)[0], test::to_host(dl)};
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "cross-entropy loss and gradient match the CPU reference") {
  vk::Device& dev = device();
  for (const Shape& s : kShapes) {
    const auto logits = test::random_vector(size_t(s.N) * s.V, s.V, -4.0f, 4.0f);
    const auto targets = random_targets(s.N, s.V, s.N);
    const uint32_t N_total = 3 * s.N;  // a micro-batch of a larger mini-batch
    const Result got = run(dev, logits, targets, s.V, N_total, 0.25f);
    const auto ld = test::to_double(logits);
    double loss = 0.25;
    std::vector<double> dlogits(logits.size());
    ref::cross_entropy_forward(ld.data(), targets.data(), loss, s.N, s.V, N_total);
    ref::cross_entropy_backward(ld.data(), targets.data(), dlogits.data(), s.N, s.V, N_total);
    test::check_close({&got.loss, 1}, std::vector<float>{float(loss)}, 1e-6, 1e-6, "loss " + name(s));
    test::check_close(got.dlogits, test::to_float(dlogits), 1e-7, 1e-5, "dlogits " + name(s));
  }
}

TEST_CASE("cross-entropy reference gradient agrees with finite differences") {
  const uint32_t N = 4, V = 7, N_total = 10;
  const auto logits = test::to_double(test::random_vector(N * V, 1, -3.0f, 3.0f));
  const auto targets = random_targets(N, V, 2);
  auto loss = [&](const std::vector<double>& l) {
    double v = 0;
    ref::cross_entropy_forward(l.data(), targets.data(), v, N, V, N_total);
    return v;
  };
  std::vector<double> grad(N * V);
  ref::cross_entropy_backward(logits.data(), targets.data(), grad.data(), N, V, N_total);
  test::check_gradient(loss, logits, grad, 1e-6, 1e-8, "dlogits");
}

TEST_CASE_FIXTURE(test::Gpu, "cross-entropy stays finite and accurate for logits of magnitude 1e4") {
  const uint32_t N = 16, V = 50;
  auto logits = test::random_vector(N * V, 1, -1e4f, 1e4f);
  const auto targets = random_targets(N, V, 2);
  // Make some targets the row maximum or within a few units of it, where the loss is small
  // and rounding matters most.
  for (uint32_t n = 0; n < N; n += 2) {
    float top = logits[n * V];
    for (uint32_t v = 1; v < V; ++v) top = std::max(top, logits[n * V + v]);
    logits[n * V + targets[n]] = top + float(n % 4) - 1.0f;
  }
  const Result got = run(device(), logits, targets, V, N, 0.0f);
  const auto ld = test::to_double(logits);
  double loss = 0;
  std::vector<double> dlogits(logits.size());
  ref::cross_entropy_forward(ld.data(), targets.data(), loss, N, V, N);
  ref::cross_entropy_backward(ld.data(), targets.data(), dlogits.data(), N, V, N);
  CHECK(std::isfinite(got.loss));
  test::check_close({&got.loss, 1}, std::vector<float>{float(loss)}, 1e-4, 1e-6, "loss");
  test::check_close(got.dlogits, test::to_float(dlogits), 1e-7, 1e-5, "dlogits");
}

TEST_CASE_FIXTURE(test::Gpu, "cross-entropy over four micro-batches sums to the mini-batch loss and gradient") {
  vk::Device& dev = device();
  const uint32_t M = 4, n = 9, N = M * n, V = 13;
  const auto logits = test::random_vector(N * V, 1, -5.0f, 5.0f);
  const auto targets = random_targets(N, V, 2);
  // The whole mini-batch at once.
  const Result whole = run(dev, logits, targets, V, N, 0.0f);
  // Micro-batch by micro-batch, adding into one loss buffer.
  vk::Buffer loss = test::zeros(dev, 1, "loss");
  std::vector<float> dlogits;
  for (uint32_t m = 0; m < M; ++m) {
    const std::vector<float> l(logits.begin() + m * n * V, logits.begin() + (m + 1) * n * V);
    const std::vector<int32_t> t(targets.begin() + m * n, targets.begin() + (m + 1) * n);
    vk::Buffer bl = test::to_device(dev, l, "logits"), bt = test::to_device(dev, t, "targets"),
               rows = test::zeros(dev, 2 * n, "rows"), dl = test::zeros(dev, n * V, "dlogits");
    vk::Commands cmd(dev, "micro-batch");
    ops::cross_entropy_forward(cmd, bl, bt, rows, loss, n, V, N);
    ops::cross_entropy_backward(cmd, bl, bt, rows, dl, n, V, N);
    cmd.run();
    const auto part = test::to_host(dl);
    dlogits.insert(dlogits.end(), part.begin(), part.end());
  }
  const float summed = test::to_host(loss)[0];
  test::check_close({&summed, 1}, std::vector<float>{whole.loss}, 1e-6, 1e-6, "summed loss");
  test::check_close(dlogits, whole.dlogits, 0.0, 0.0, "micro-batch dlogits");
  double want = 0;
  const auto ld = test::to_double(logits);
  ref::cross_entropy_forward(ld.data(), targets.data(), want, N, V, N);
  test::check_close({&summed, 1}, std::vector<float>{float(want)}, 1e-6, 1e-6, "loss vs reference");
}

TEST_CASE_FIXTURE(test::Gpu, "cross-entropy accuracy counts rows whose first maximum is the target") {
  vk::Device& dev = device();
  for (const Shape& s : kShapes) {
    auto logits = test::random_vector(size_t(s.N) * s.V, s.V, -2.0f, 2.0f);
    auto targets = random_targets(s.N, s.V, s.N);
    // Ties: row 0's maximum appears twice, the target on the first (counts); row 1's
    // maximum appears twice, the target on the second (does not count).
    if (s.V >= 3 && s.N >= 2) {
      logits[1] = logits[2] = 9.0f, targets[0] = 1;
      logits[s.V + 0] = logits[s.V + 2] = 9.0f, targets[1] = 2;
    }
    // Every third row predicts its target, so the count is not left to chance.
    for (uint32_t n = 2; n < s.N; n += 3) logits[size_t(n) * s.V + targets[n]] = 10.0f;
    vk::Buffer bl = test::to_device(dev, logits, "logits"), bt = test::to_device(dev, targets, "targets"),
               correct = test::to_device(dev, std::vector<int32_t>{5}, "correct");
    vk::Commands cmd(dev, "accuracy");
    ops::cross_entropy_accuracy(cmd, bl, bt, correct, s.N, s.V);
    cmd.run();
    uint32_t got = 0;
    vk::download(correct, &got, 4);
    uint32_t want = 5;
    ref::cross_entropy_accuracy(logits.data(), targets.data(), want, s.N, s.V);
    CHECK_MESSAGE(got == want, name(s), ": counted ", got, ", want ", want);
    CHECK(want >= 5 + s.N / 3);  // the rows forced above count
  }
}

// torch.argmax's order on rows of 300 (several lanes, several subgroups on a GPU): a row of
// -inf is won by its first element, a NaN by the first NaN above every number, -0 ties +0.
// Each row's target is its argmax (every row counts), then the index after it (none does).
TEST_CASE_FIXTURE(test::Gpu, "cross-entropy accuracy takes torch.argmax's index on rows of -inf, NaN and signed zeros") {
  vk::Device& dev = device();
  const uint32_t V = 300;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  struct Row {
    std::vector<std::pair<uint32_t, float>> set;  // over random values in [-2, 2]
    std::optional<float> fill;                    // or over this value everywhere
    int32_t argmax;
  };
  const std::vector<Row> rows = {
      {{}, -inf, 0},                          // all -inf
      {{{0, nan}}, {}, 0},                    // NaN first
      {{{250, nan}, {257, nan}}, {}, 250},    // the first of two NaNs, past the first lanes
      {{{7, inf}, {299, nan}}, {}, 299},      // a NaN above +inf
      {{{5, -0.0f}, {3, 0.0f}}, -1.0f, 3},   // +0 before -0: the first
      {{{5, 0.0f}, {3, -0.0f}}, -1.0f, 3},   // -0 before +0: the first
      {{}, nan, 0},                           // all NaN
      {{{100, inf}, {200, inf}}, {}, 100},    // the first of two +inf
      {{{140, 9.0f}, {290, 9.0f}}, {}, 140},  // the first of two maxima
  };
  const uint32_t N = uint32_t(rows.size());
  std::vector<float> logits = test::random_vector(size_t(N) * V, 77, -2.0f, 2.0f);
  std::vector<int32_t> argmax(N), after(N);
  for (uint32_t n = 0; n < N; ++n) {
    if (rows[n].fill) std::fill_n(logits.begin() + size_t(n) * V, V, *rows[n].fill);
    for (const auto& [v, x] : rows[n].set) logits[size_t(n) * V + v] = x;
    argmax[n] = rows[n].argmax, after[n] = (rows[n].argmax + 1) % int32_t(V);
  }
  for (const auto& expected : {std::pair{argmax, N}, std::pair{after, 0u}}) {
    const auto& targets = expected.first;
    const uint32_t want = expected.second;  // not bound: CHECK_MESSAGE's lambda cannot take a binding in clang 14
    uint32_t ref_count = 0;
    ref::cross_entropy_accuracy(logits.data(), targets.data(), ref_count, N, V);
    CHECK(ref_count == want);
    vk::Buffer bl = test::to_device(dev, logits, "logits"), bt = test::to_device(dev, targets, "targets"),
               correct = test::zeros(dev, 1, "correct");
    vk::Commands cmd(dev, "accuracy");
    ops::cross_entropy_accuracy(cmd, bl, bt, correct, N, V);
    cmd.run();
    uint32_t got = 0;
    vk::download(correct, &got, 4);
    CHECK_MESSAGE(got == want, "rows whose target is the index ", want ? "of" : "after", " torch.argmax's");
  }
}

TEST_CASE_FIXTURE(test::Gpu, "cross-entropy evaluation adds the loss and the correct count") {
  vk::Device& dev = device();
  const uint32_t N = 20, V = 10;
  const auto logits = test::random_vector(N * V, 1, -3.0f, 3.0f);
  const auto targets = random_targets(N, V, 2);
  vk::Buffer bl = test::to_device(dev, logits, "logits"), bt = test::to_device(dev, targets, "targets"),
             rows = test::zeros(dev, 2 * N, "rows"), loss = test::zeros(dev, 1, "loss"),
             correct = test::zeros(dev, 1, "correct");
  vk::Commands cmd(dev, "evaluate");
  ops::cross_entropy_evaluate(cmd, bl, bt, rows, loss, correct, N, V, N);
  cmd.run();
  double want_loss = 0;
  uint32_t want_correct = 0, got_correct = 0;
  const auto ld = test::to_double(logits);
  ref::cross_entropy_forward(ld.data(), targets.data(), want_loss, N, V, N);
  ref::cross_entropy_accuracy(logits.data(), targets.data(), want_correct, N, V);
  vk::download(correct, &got_correct, 4);
  test::check_close(test::to_host(loss), std::vector<float>{float(want_loss)}, 1e-6, 1e-6, "loss");
  CHECK(got_correct == want_correct);
}

TEST_CASE_FIXTURE(test::Gpu, "cross-entropy with a target outside the vocabulary gives a NaN loss") {
  std::vector<int32_t> targets = {1, 4, 0};
  const Result got = run(device(), test::random_vector(3 * 4, 1), targets, 4, 3, 0.0f);
  CHECK(std::isnan(got.loss));
}

TEST_CASE_FIXTURE(test::Gpu, "cross-entropy refuses a mini-batch smaller than its micro-batch") {
  vk::Device& dev = device();
  vk::Buffer b = test::zeros(dev, 64, "scratch");
  vk::Commands cmd(dev, "cross-entropy");
  CHECK_THROWS_WITH_AS(ops::cross_entropy_forward(cmd, b, b, b, b, 8, 4, 4),
                       doctest::Contains("8 rows of a mini-batch of 4"), InternalError);
  CHECK_THROWS_AS(ops::cross_entropy_backward(cmd, b, b, b, b, 8, 4, 0), InternalError);
}

}  // namespace kernels_cross_entropy_test
