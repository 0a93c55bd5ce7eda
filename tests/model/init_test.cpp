// initial_values: deterministic in (seed, name), and drawn from the declared distribution.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "model/model.h"

namespace model_init_test {

using namespace brigade;

namespace {

model::ParamSpec spec(const std::string& name, int64_t n, model::Init init, float scale) {
  return {name, {n}, model::ParamKind::Trainable, init, scale};
}

}  // namespace

TEST_CASE("initial values are a pure function of the seed and the name") {
  const auto s = spec("3.weight", 1000, model::Init::Uniform, 0.1f);
  CHECK(model::initial_values(s, 7) == model::initial_values(s, 7));
  CHECK(model::initial_values(s, 7) != model::initial_values(s, 8));
  CHECK(model::initial_values(s, 7) != model::initial_values(spec("5.weight", 1000, model::Init::Uniform, 0.1f), 7));
  // A bigger tensor of the same name starts with the same values.
  const auto big = model::initial_values(spec("3.weight", 2000, model::Init::Uniform, 0.1f), 7);
  const auto small = model::initial_values(s, 7);
  CHECK(std::equal(small.begin(), small.end(), big.begin()));
}

TEST_CASE("zeros and ones") {
  for (float v : model::initial_values(spec("b", 17, model::Init::Zeros, 0), 1)) CHECK(v == 0.0f);
  for (float v : model::initial_values(spec("w", 17, model::Init::Ones, 0), 1)) CHECK(v == 1.0f);
}

TEST_CASE("uniform values fill the half-open interval from -scale to scale") {
  const float scale = 1 / 28.0f;
  const auto v = model::initial_values(spec("1.weight", 200000, model::Init::Uniform, scale), 3);
  double sum = 0, lo = 1, hi = -1;
  for (float x : v) {
    CHECK_MESSAGE((x >= -scale && x < scale), x);
    sum += x, lo = std::min<double>(lo, x), hi = std::max<double>(hi, x);
  }
  CHECK(std::abs(sum / v.size()) < 0.01 * scale);
  CHECK(lo < -0.999 * scale);
  CHECK(hi > 0.999 * scale);
}

TEST_CASE("normal values have mean 0 and the requested standard deviation") {
  const float std_dev = 0.02f;
  const auto v = model::initial_values(spec("transformer.wte.weight", 200000, model::Init::Normal, std_dev), 3);
  double sum = 0, sq = 0;
  size_t beyond_3 = 0;
  for (float x : v) {
    sum += x, sq += double(x) * x;
    beyond_3 += std::abs(x) > 3 * std_dev;
  }
  const double mean = sum / v.size(), sd = std::sqrt(sq / v.size() - mean * mean);
  CHECK(std::abs(mean) < 0.01 * std_dev);
  CHECK(sd == doctest::Approx(std_dev).epsilon(0.02));
  CHECK(double(beyond_3) / v.size() == doctest::Approx(0.0027).epsilon(0.2));  // a Gaussian tail
}

}  // namespace model_init_test
