#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "check.h"
#include "gpu.h"
#include "ops/precision.h"
#include "shaders/precision.h"
#include "vk/commands.h"

namespace kernels_precision_test {

using namespace brigade;
using ops::Precision;

namespace {

// An oracle independent of shaders/precision.h's bit manipulation: every finite value of the
// format from its definition (sign, `exp_bits` of exponent, the rest mantissa), and the
// rounding of x to the nearest of them, ties to the even mantissa, past the largest finite
// value's half-step to infinity.
struct Format {
  int exp_bits, man_bits;
  std::vector<std::pair<double, uint32_t>> finite;  // non-negative values and their mantissa
  double overflow;                                  // from here on x rounds to infinity

  Format(int e, int m) : exp_bits(e), man_bits(m) {
    const int bias = (1 << (e - 1)) - 1, top = (1 << e) - 1;
    for (int exp = 0; exp < top; ++exp)
      for (uint32_t man = 0; man < (1u << m); ++man) {
        const double frac = exp == 0 ? man / std::ldexp(1.0, m) : 1 + man / std::ldexp(1.0, m);
        finite.push_back({std::ldexp(frac, (exp == 0 ? 1 : exp) - bias), man});
      }
    const double largest = finite.back().first;
    overflow = largest + std::ldexp(1.0, top - 1 - bias - m - 1);
  }

  double round(double x) const {
    if (std::isnan(x)) return x;
    const double a = std::abs(x);
    if (a >= overflow) return std::copysign(INFINITY, x);
    auto hi = std::lower_bound(finite.begin(), finite.end(), std::make_pair(a, 0u),
                               [](auto p, auto q) { return p.first < q.first; });
    if (hi == finite.end()) return std::copysign(finite.back().first, x);  // below the overflow edge
    if (hi->first == a) return x;
    auto lo = hi - 1;
    const double dl = a - lo->first, dh = hi->first - a;
    const double r = dl < dh ? lo->first : dh < dl ? hi->first : (lo->second % 2 == 0 ? lo->first : hi->first);
    return std::copysign(r, x);
  }
};

const Format& oracle(Precision p) {
  static const Format bf16(8, 7), fp16(5, 10);
  return p == Precision::Bf16 ? bf16 : fp16;
}

// Values across both formats' ranges: ordinary ones, ties between neighbours, each format's
// subnormals and overflow edge, zeros of both signs, infinities and NaN.
std::vector<float> probe_values(uint32_t n, uint32_t seed) {
  std::vector<float> v = test::random_vector(n, seed, -3.0f, 3.0f);
  const float specials[] = {0.0f, -0.0f, 1.0f, 1.00390625f, 1.01171875f, 1.00048828125f, 1.00146484375f,
                            65504.0f, 65519.0f, 65520.0f, -70000.0f, 6.1e-5f, 5.96e-8f, 2.98e-8f, 2.99e-8f,
                            3e-6f, -1e-7f, 1e-30f, 1e-40f, 3.4e38f, -3.3961e38f, INFINITY, -INFINITY};
  for (size_t i = 0; i < std::size(specials) && i < n; ++i) v[i] = specials[i];
  for (size_t i = std::size(specials); i < n; i += 3)  // spread over many exponents
    v[i] = std::ldexp(v[i], int(i % 60) - 30);
  return v;
}

std::vector<uint32_t> words_of(const vk::Buffer& b) {
  const std::vector<float> f = test::to_host(b);
  std::vector<uint32_t> w(f.size());
  for (size_t i = 0; i < f.size(); ++i) w[i] = std::bit_cast<uint32_t>(f[i]);
  return w;
}

void check_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  REQUIRE(got.size() >= want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      CHECK_MESSAGE(std::isnan(got[i]), what, " element ", i);
      continue;
    }
    if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i])) {
      FAIL_CHECK(what, " element ", i, ": ", got[i], " against ", want[i]);
      return;
    }
  }
}

}  // namespace

TEST_CASE("the host's rounding to bf16 and fp16 is the nearest value of the format, ties to even") {
  const std::vector<float> x = probe_values(4096, 5);
  for (Precision p : {Precision::Bf16, Precision::Fp16}) {
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = oracle(p).round(x[i]);
      const float got = ops::round_on_host(x[i], p);
      if (std::isnan(want)) {
        CHECK(std::isnan(got));
      } else if (double(got) != want || std::signbit(got) != std::signbit(want)) {
        FAIL_CHECK(std::string(ops::precision_name(p)), " of ", x[i], ": ", got, " against ", want);
        break;
      }
    }
  }
  CHECK(ops::round_on_host(1.0f, Precision::Fp32) == 1.0f);
}

// shaders/precision.h selects among its cases rather than branching, so each case's
// arithmetic runs on every input: every fp16 value widens to the oracle's, and every midpoint
// between neighbours, and the fp32 values either side of it, round as the oracle rounds.
TEST_CASE("every fp16 value widens exactly, and every midpoint and its neighbours round to nearest even") {
  const Format& f = oracle(Precision::Fp16);
  uint32_t checked = 0;
  for (size_t i = 0; i < f.finite.size(); ++i) {
    const uint32_t h = uint32_t(i);  // the oracle lists the non-negative values in bit order
    for (uint32_t sign : {0u, 0x8000u}) {
      const float got = std::bit_cast<float>(shaders::bits_from_half(h | sign, BRIGADE_FORMAT_FP16));
      const double want = sign ? -f.finite[i].first : f.finite[i].first;
      if (double(got) != want || std::signbit(got) != bool(sign)) {
        FAIL_CHECK("fp16 bits ", h | sign, " widen to ", got, " against ", want);
        return;
      }
    }
    const double next = i + 1 < f.finite.size() ? f.finite[i + 1].first : f.overflow;
    const float mid = float((f.finite[i].first + next) / 2);  // exact in fp32
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)})
      for (float s : {x, -x}) {
        const float got = ops::round_on_host(s, Precision::Fp16);
        ++checked;
        if (double(got) != f.round(s) || std::signbit(got) != std::signbit(s)) {
          FAIL_CHECK("fp16 of ", s, ": ", got, " against ", f.round(s));
          return;
        }
      }
  }
  CHECK(checked == 6 * f.finite.size());
  const uint32_t inf = 0x7C00u, nan = 0x7E01u;
  CHECK(std::isinf(std::bit_cast<float>(shaders::bits_from_half(inf, BRIGADE_FORMAT_FP16))));
  CHECK(std::isnan(std::bit_cast<float>(shaders::bits_from_half(nan, BRIGADE_FORMAT_FP16))));
}

TEST_CASE_FIXTURE(test::Gpu, "pack, unpack and round kernels give the host's bits in bf16 and fp16") {
  vk::Device& dev = device();
  for (Precision p : {Precision::Bf16, Precision::Fp16})
    for (uint32_t n : {1u, 2u, 7u, 8u, 513u, 70001u, 70004u}) {  // multiples of 4: the pack's quads
      const std::string what = std::string(ops::precision_name(p)) + " n=" + std::to_string(n);
      const std::vector<float> x = probe_values(n, n);
      std::vector<float> rounded(n);
      for (uint32_t i = 0; i < n; ++i) rounded[i] = ops::round_on_host(x[i], p);
      const uint32_t words = (n + 1) / 2;
      vk::Buffer kept = test::to_device(dev, x, "kept"), changed = test::to_device(dev, x, "changed");
      vk::Buffer packed = test::zeros(dev, words, "packed"), again = test::zeros(dev, words, "packed again");
      vk::Buffer back = test::zeros(dev, n, "unpacked"), in_place = test::to_device(dev, x, "rounded in place");
      vk::Commands cmd(dev, "precision");
      ops::pack(cmd, kept, packed, n, p, false);
      ops::pack(cmd, changed, again, n, p, true);
      ops::unpack(cmd, packed, back, n, p);
      ops::round_to(cmd, in_place, n, p);
      cmd.run();
      std::vector<float> unpacked(n);
      ops::unpack_on_host(words_of(packed), unpacked, p);
      check_bits(unpacked, rounded, what + " packed");
      check_bits(test::to_host(back), rounded, what + " unpacked");
      check_bits(test::to_host(in_place), rounded, what + " rounded in place");
      check_bits(test::to_host(changed), rounded, what + " rounded while packing");
      check_bits(test::to_host(kept), x, what + " source left alone");
      CHECK_MESSAGE(words_of(again) == words_of(packed), what);
      if (n % 2) CHECK_MESSAGE((words_of(packed).back() >> 16) == 0u, what, ": the unused half is zero");
    }
}

TEST_CASE("stored bytes of 16-bit tensors are whole words") {
  CHECK(ops::stored_bytes(7, Precision::Fp32) == 28);
  CHECK(ops::stored_bytes(7, Precision::Bf16) == 16);
  CHECK(ops::stored_bytes(8, Precision::Fp16) == 16);
  CHECK(ops::parse_precision("bf16") == Precision::Bf16);
  CHECK_THROWS_WITH_AS(ops::parse_precision("fp8"), doctest::Contains("unknown `precision` 'fp8'"), UserError);
}

}  // namespace kernels_precision_test
