#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "check.h"
#include "shaders/elementwise.h"
#include "gpu.h"
#include "ops/dropout.h"
#include "ref/dropout.h"
#include "util/error.h"
#include "vk/commands.h"

namespace kernels_dropout_test {

using namespace brigade;

namespace {

std::vector<float> forward(vk::Device& dev, const std::vector<float>& x, float p,
                           const ops::DropoutKey& key) {
  const uint32_t n = uint32_t(x.size());
  vk::Buffer bx = test::to_device(dev, x, "x"), by = test::zeros(dev, n, "y");
  vk::Commands cmd(dev, "dropout");
  ops::dropout_forward(cmd, bx, by, n, p, key);
  cmd.run();
  return test::to_host(by);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// Inputs with no zeros, so y == 0 exactly where the mask dropped the element.
std::vector<float> nonzero_inputs(uint32_t n, uint32_t seed) {
  auto x = test::random_vector(n, seed, 0.5f, 1.5f);
  for (uint32_t i = 0; i < n; i += 2) x[i] = -x[i];
  return x;
}

const ops::DropoutKey kKey{0x0123456789ABCDEFull, 7, 2, 5};

}  // namespace

TEST_CASE("philox reproduces the Random123 known-answer vectors") {
  // Random123 tests/kat_vectors, "philox4x32 10": counter, key, then the expected words.
  struct Kat {
    shaders::uvec4 counter;
    uint32_t key0, key1;
    shaders::uvec4 want;
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, 0, 0, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, 0xffffffff, 0xffffffff,
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, 0xa4093822, 0x299f31d0,
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    const shaders::uvec4 got = shaders::philox4x32_10(k.counter, k.key0, k.key1);
    CHECK(got.x == k.want.x);
    CHECK(got.y == k.want.y);
    CHECK(got.z == k.want.z);
    CHECK(got.w == k.want.w);
  }
}

TEST_CASE_FIXTURE(test::Gpu, "dropout forward draws bit for bit the mask of the CPU reference") {
  vk::Device& dev = device();
  for (uint32_t n : {1u, 3u, 1023u, 1025u, 5003u}) {
    for (float p : {0.1f, 0.5f}) {
      const auto x = nonzero_inputs(n, n);
      std::vector<float> want(n);
      ref::dropout_forward(x.data(), want.data(), n, p, kKey);
      CHECK_MESSAGE(same_bits(forward(dev, x, p, kKey), want), "n=", n, " p=", p);
    }
  }
}

TEST_CASE_FIXTURE(test::Gpu, "dropout forward with the same key is bit-identical") {
  vk::Device& dev = device();
  const auto x = nonzero_inputs(10007, 1);
  const auto first = forward(dev, x, 0.3f, kKey), second = forward(dev, x, 0.3f, kKey);
  CHECK(same_bits(first, second));
}

TEST_CASE_FIXTURE(test::Gpu, "dropout masks change with the micro-batch and the step and the layer and the seed") {
  vk::Device& dev = device();
  const uint32_t n = 1 << 16;
  const float p = 0.5f;
  const auto x = nonzero_inputs(n, 2);
  const auto base = forward(dev, x, p, kKey);
  auto other = [&](ops::DropoutKey k, const char* what) {
    const auto y = forward(dev, x, p, k);
    // Independent masks disagree on a fraction 2 p (1 - p) = 1/2 of the elements.
    uint32_t differ = 0;
    for (uint32_t i = 0; i < n; ++i) differ += (y[i] == 0.0f) != (base[i] == 0.0f);
    CHECK_MESSAGE(std::abs(double(differ) / n - 0.5) < 0.02, what, ": masks differ at ", differ,
                  " of ", n, " elements");
  };
  ops::DropoutKey k = kKey;
  k.micro_batch += 1;
  other(k, "next micro-batch");
  k = kKey, k.step += 1;
  other(k, "next step");
  k = kKey, k.layer += 1;
  other(k, "next layer");
  k = kKey, k.seed ^= 1ull << 40;
  other(k, "seed differing in its high word");
}

TEST_CASE_FIXTURE(test::Gpu, "dropout keeps a fraction of elements within six sigma of 1 - p and scales them by 1 over 1 - p") {
  vk::Device& dev = device();
  const uint32_t n = 1 << 20;
  const auto x = nonzero_inputs(n, 3);
  for (float p : {0.1f, 0.5f, 0.9f}) {
    const auto y = forward(dev, x, p, kKey);
    const float scale = float(1.0 / (1.0 - double(p)));
    uint32_t kept = 0, wrong = 0;
    for (uint32_t i = 0; i < n; ++i) {
      if (y[i] == 0.0f) continue;
      ++kept;
      wrong += y[i] != x[i] * scale;
    }
    const double sigma = std::sqrt(double(n) * p * (1.0 - p));
    CHECK_MESSAGE(std::abs(kept - double(n) * (1.0 - p)) < 6 * sigma, "p=", p, ": kept ", kept,
                  " of ", n);
    CHECK_MESSAGE(wrong == 0, "p=", p, ": ", wrong, " kept elements not scaled by 1/(1-p)");
  }
}

TEST_CASE_FIXTURE(test::Gpu, "dropout with p = 0 is the identity") {
  const auto x = nonzero_inputs(1000, 4);
  CHECK(same_bits(forward(device(), x, 0.0f, kKey), x));
}

TEST_CASE_FIXTURE(test::Gpu, "dropout backward adds dy scaled by the mask the forward drew") {
  vk::Device& dev = device();
  for (uint32_t n : {1u, 1023u, 5003u}) {
    const float p = 0.4f;
    const auto x = nonzero_inputs(n, n);
    const auto dy = test::random_vector(n, n + 1), dx0 = test::random_vector(n, n + 2);
    const auto y = forward(dev, x, p, kKey);
    vk::Buffer bdy = test::to_device(dev, dy, "dy"), bdx = test::to_device(dev, dx0, "dx");
    vk::Commands cmd(dev, "dropout backward");
    ops::dropout_backward(cmd, bdy, bdx, n, p, kKey);
    cmd.run();
    // The mask comes from the forward's output, not from the reference: backward must redraw
    // exactly the forward's mask.
    const float scale = float(1.0 / (1.0 - double(p)));
    std::vector<float> want = dx0;
    for (uint32_t i = 0; i < n; ++i)
      if (y[i] != 0.0f) want[i] += dy[i] * scale;
    test::check_close(test::to_host(bdx), want, 1e-6, 1e-6, "dropout dx n=" + std::to_string(n));
    std::vector<float> want_ref = dx0;
    ref::dropout_backward(dy.data(), want_ref.data(), n, p, kKey);
    test::check_close(test::to_host(bdx), want_ref, 1e-6, 1e-6, "dropout dx vs reference");
  }
}

TEST_CASE("dropout reference backward agrees with finite differences") {
  const uint32_t n = 64;
  const float p = 0.3f;
  const auto x = test::to_double(nonzero_inputs(n, 5));
  const auto r = test::to_double(test::random_vector(n, 6));
  auto loss = [&](const std::vector<double>& v) {
    std::vector<double> y(n);
    ref::dropout_forward(v.data(), y.data(), n, p, kKey);
    double s = 0;
    for (uint32_t i = 0; i < n; ++i) s += y[i] * r[i];
    return s;
  };
  std::vector<double> dx(n, 0.0);
  ref::dropout_backward(r.data(), dx.data(), n, p, kKey);
  test::check_gradient(loss, x, dx, 1e-6, 1e-8, "dropout dx");
}

TEST_CASE("dropout rejects a probability outside 0 to 1") {
  for (float p : {-0.1f, 1.0f, 1.5f, std::nanf("")})
    CHECK_THROWS_AS(ops::dropout_push(16, p, kKey), UserError);
}

}  // namespace kernels_dropout_test
