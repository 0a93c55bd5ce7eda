#include "check.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

namespace brigade::test {

std::vector<float> random_vector(size_t n, uint32_t seed, float lo, float hi) {
  std::vector<float> v(n);
  uint64_t s = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (auto& x : v) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;  // xorshift64
    x = lo + (hi - lo) * float((s >> 40) & 0xFFFFFF) / float(1 << 24);
  }
  return v;
}

std::vector<double> to_double(std::span<const float> v) { return {v.begin(), v.end()}; }

double max_abs(std::span<const float> v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}

bool worse_error(double err, double worst) { return !std::isnan(worst) && !(err <= worst); }

double dot(std::span<const double> a, std::span<const double> b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

std::vector<float> to_float(std::span<const double> v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = float(v[i]);
  return out;
}

vk::Buffer to_device(vk::Device& dev, std::span<const float> data, const std::string& name,
                     vk::Category category) {
  vk::Buffer b(dev, std::max<size_t>(data.size(), 1) * 4, category, name);
  if (!data.empty()) vk::upload(b, data.data(), data.size() * 4);
  return b;
}

vk::Buffer to_device(vk::Device& dev, std::span<const int32_t> data, const std::string& name,
                     vk::Category category) {
  vk::Buffer b(dev, std::max<size_t>(data.size(), 1) * 4, category, name);
  if (!data.empty()) vk::upload(b, data.data(), data.size() * 4);
  return b;
}

vk::Buffer zeros(vk::Device& dev, size_t floats, const std::string& name, vk::Category category) {
  std::vector<float> z(std::max<size_t>(floats, 1), 0.0f);
  return to_device(dev, z, name, category);
}

std::vector<float> to_host(const vk::Buffer& buffer) {
  std::vector<float> out(buffer.size() / 4);
  vk::download(buffer, out.data(), out.size() * 4);
  return out;
}

void check_close(std::span<const float> got, std::span<const float> want, double atol,
                 double rtol, const std::string& what) {
  REQUIRE_MESSAGE(got.size() == want.size(), what, ": size ", got.size(), " != ", want.size());
  size_t bad = 0, worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    // An infinity is matched by itself alone (inf - inf would be NaN, which passes no test).
    const double excess = std::isinf(w) ? (g == w ? -1.0 : INFINITY) : std::abs(g - w) - (atol + rtol * std::abs(w));
    if (excess > 0 || std::isnan(g) != std::isnan(w)) ++bad;
    if (excess > worst_excess || std::isnan(g)) worst_excess = excess, worst = i;
  }
  std::ostringstream msg;
  msg << what << ": " << bad << " of " << got.size() << " elements outside atol " << atol
      << " rtol " << rtol;
  if (!got.empty())
    msg << "; worst at [" << worst << "]: got " << got[worst] << ", want " << want[worst]
        << " (|diff| " << std::abs(double(got[worst]) - want[worst]) << ")";
  msg << "; first values got/want:";
  for (size_t i = 0; i < std::min<size_t>(4, got.size()); ++i) msg << " " << got[i] << "/" << want[i];
  CHECK_MESSAGE(bad == 0, msg.str());
}

void check_gradient(const std::function<double(const std::vector<double>&)>& f,
                    std::vector<double> x, std::span<const double> grad, double eps, double tol,
                    const std::string& what) {
  REQUIRE(grad.size() == x.size());
  size_t bad = 0, worst = 0;
  double worst_err = 0, worst_fd = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + eps;
    const double up = f(x);
    x[i] = keep - eps;
    const double down = f(x);
    x[i] = keep;
    const double fd = (up - down) / (2 * eps);
    const double err = std::abs(fd - grad[i]) / std::max(1.0, std::abs(fd));
    if (!(err <= tol)) ++bad;
    if (err > worst_err || std::isnan(err)) worst_err = err, worst = i, worst_fd = fd;
  }
  CHECK_MESSAGE(bad == 0, what, ": ", bad, " of ", x.size(),
                " gradient entries disagree with finite differences; worst [", worst,
                "]: analytic ", grad[worst], ", numeric ", worst_fd, " (rel err ", worst_err, ")");
}

}  // namespace brigade::test
