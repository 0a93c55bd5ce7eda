// How `bench products` checks a candidate tiling's C against the default's
// (tools/brigade/product_check.h): the share of the difference allowed, where the worst and the
// farthest elements lie, an element summed in double as the kernels' store defines it, and how
// far from that sum any of the kernels' ways of summing can lie.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "product_check.h"
#include "ref/matmul.h"

using brigade::cli::disagreement;
using brigade::cli::Element;
using brigade::cli::HostOperands;
using brigade::cli::off_by;
using brigade::cli::summed_element;
using brigade::ops::MatmulParams;

namespace {

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * float(int(i * 7 % 13) - 6);
  return v;
}

}  // namespace

TEST_CASE("bench products' check: the worst element, as a share of what the sums' order allows") {
  MatmulParams p{.M = 3, .N = 4, .K = 100, .batch = 2};
  p.stride_c = 12;
  const std::vector<float> want = ramp(24, 0.5f);
  CHECK(disagreement(p, want, want).share == 0);
  std::vector<float> got = want;
  const double allowed = 1e-5 * 10;  // 1e-5 sqrt(K), relative to 1 + |C|
  got[12 + 2 * 4 + 1] += float(allowed * (1 + std::abs(want[12 + 2 * 4 + 1])) * 0.5);
  CHECK(disagreement(p, got, want).share < 1);
  got[12 + 1 * 4 + 3] += 0.25f;
  got[0] -= 0.3f;  // C[0][0][0] = -3: farther apart, a smaller share of its larger allowance (750x)
  const auto d = disagreement(p, got, want);
  CHECK(d.share > 1);
  CHECK(d.worst.z == 1);
  CHECK(d.worst.m == 1);
  CHECK(d.worst.n == 3);
  CHECK(d.worst.got == doctest::Approx(want[12 + 4 + 3] + 0.25));
  CHECK(d.worst.want == want[12 + 4 + 3]);
  CHECK(d.farthest.z == 0);
  CHECK(d.farthest.m == 0);
  CHECK(d.farthest.n == 0);
  CHECK(d.farthest.got == doctest::Approx(-3.3));
  // A 16-bit C: two of its units in the last place on top.
  p.c_format = brigade::ops::Precision::Bf16;
  CHECK(disagreement(p, got, want).share < d.share);
  CHECK(brigade::cli::explained(p, d, {1.4, 0.5}) ==
        "1000.00x the difference allowed; the worst, C[1][1][3]: -1.25 against the default's -1.5, 1.4 summed in double");
  CHECK(brigade::cli::explained(p, d, {1.4, 0.5}, 5.3, 0.25) ==
        "1000.00x the difference allowed; the worst, C[1][1][3]: -1.25 against the default's -1.5, 1.4 summed in "
        "double; from it, the tiling 5.30x and the default 0.25x what fp32 sums can be off");
  // NaN on one side only is no agreement at any size.
  got[5] = std::numeric_limits<float>::quiet_NaN();
  const auto nan = disagreement(p, got, want);
  CHECK(std::isinf(nan.share));
  p.batch = 1;  // one matrix: no batch index; no double sum known
  CHECK(nan.farthest.m == nan.worst.m);
  CHECK(nan.farthest.n == nan.worst.n);
  CHECK(brigade::cli::explained(p, nan, {}) == "NaN on one side only; the worst, C[1][1]: nan against the default's 1.5");
}

TEST_CASE("bench products' check: one element summed in double, as the kernels store it") {
  // Transposes, two terms a sum, two heads, a bias along the rows, alpha and accumulation.
  MatmulParams p{.M = 5, .N = 6, .K = 7, .trans_a = true, .trans_b = true, .accumulate = true, .alpha = 0.5f,
                 .batch = 4, .terms = 2, .bias_rows = true};
  p.heads = 2;
  p.stride_a = 2 * 35, p.head_stride_a = 35, p.stride_b = 2 * 42, p.head_stride_b = 42;  // heads side by side
  p.stride_c = 2 * 30, p.head_stride_c = 30;
  HostOperands o{ramp(4 * 2 * 35, 0.25f), ramp(4 * 2 * 42, 0.125f), ramp(4 * 30, 1.0f), ramp(5, 2.0f), {}};
  std::vector<double> want(o.c.begin(), o.c.end());
  const std::vector<double> a(o.a.begin(), o.a.end()), b(o.b.begin(), o.b.end()), bias(o.bias.begin(), o.bias.end());
  brigade::ref::matmul<double>(a, b, want, p, bias);
  for (uint32_t z = 0; z < 4; ++z)
    for (uint32_t m = 0; m < 5; ++m)
      for (uint32_t n = 0; n < 6; ++n)
        CHECK(summed_element(p, o, {z, m, n}).value == doctest::Approx(want[z * 30 + m * 6 + n]));

  // GELU's gradient scales the sum and bias by gelu'(pre); ReLU clips it.
  MatmulParams q{.M = 2, .N = 2, .K = 3, .epilogue = MatmulParams::Epilogue::GeluGrad};
  HostOperands g{{1, 2, 3, -1, -2, -3}, {1, 1, 1, 1, 1, 1}, {}, {}, {0.0f, 50.0f, -50.0f, 1.0f}};  // sums 6, 6, -6, -6
  CHECK(summed_element(q, g, {0, 0, 0}).value == doctest::Approx(6 * 0.5));   // gelu'(0) = 1/2
  CHECK(summed_element(q, g, {0, 0, 1}).value == doctest::Approx(6 * 1.0));   // gelu'(50) = 1
  CHECK(summed_element(q, g, {0, 1, 0}).value == doctest::Approx(0).epsilon(1e-12));  // gelu'(-50) = 0
  q.epilogue = MatmulParams::Epilogue::Relu;
  CHECK(summed_element(q, g, {0, 1, 0}).value == 0);
  CHECK(summed_element(q, g, {0, 0, 0}).value == 6);
}

TEST_CASE("bench products' check: how far a kernel's sum can lie from the double sum") {
  // Terms 3, -1, -1: the running sum reaches 3, the largest term is 3, so S = 2 * 3 + 3 = 9 and
  // the sums' share is 1.25 * 3 terms * 2^-23 * 9, then four units in the last place of C's 1.
  MatmulParams p{.M = 1, .N = 1, .K = 3};
  const HostOperands o{{3, 1, -1}, {1, -1, 1}, {}, {}, {}};
  const double unit = std::ldexp(1.0, -23);
  const auto s = summed_element(p, o, {});
  CHECK(s.value == 1);
  CHECK(s.allowed == doctest::Approx(1.25 * 3 * 9 * unit + 4 * unit));
  CHECK(off_by(1, s) == 0);
  CHECK(off_by(1 + s.allowed / 2, s) == doctest::Approx(0.5));
  CHECK(off_by(1 - 2 * s.allowed, s) == doctest::Approx(2));
  // alpha scales the sums' share; a 16-bit C adds its rounding.
  p.alpha = 4, p.c_format = brigade::ops::Precision::Bf16;
  const auto t = summed_element(p, o, {});
  CHECK(t.value == 4);
  CHECK(t.allowed == doctest::Approx(4 * 1.25 * 3 * 9 * unit + 4 * unit * 4 + 4.0 / 128));
}

namespace {

// An fp32 sum the way matrix units may take it (as NVIDIA's are reported to): steps of 8 terms,
// each step's terms and running sum aligned to the largest of them, three bits past fp32's kept,
// the step's sum truncated to fp32, toward zero, which drifts with the running sum's sign.
float truncated_sum(const std::vector<double>& terms, size_t from, size_t to) {
  float c = 0;
  for (size_t k = from; k < to; k += 8) {
    double largest = std::abs(double(c));
    for (size_t j = k; j < k + 8; ++j) largest = std::max(largest, std::abs(terms[j]));
    int e = 0;
    std::frexp(largest, &e);
    const double quantum = std::ldexp(1.0, e - 27);
    double s = std::trunc(double(c) / quantum) * quantum;
    for (size_t j = k; j < k + 8; ++j) s += std::trunc(terms[j] / quantum) * quantum;
    c = float(s);
    if (std::abs(double(c)) > std::abs(s)) c = std::nextafter(c, 0.0f);
  }
  return c;
}

}  // namespace

TEST_CASE("bench products' check: truncated sums in two parts of K and whole differ past IEEE's wander, "
          "both within what fp32 sums allow, and a left-out step does not") {
  // C = A B over K = 4096 whose second half of terms takes back the first's: the running sum
  // climbs to about 512 and comes back to 0, as a weight gradient's can. Summed as matrix units
  // may sum (truncation, which drifts one way), whole (the default) and in two parts (a
  // candidate's split K) lie further apart than IEEE sums' 1e-5 sqrt(K), both as near the
  // double sum as fp32 sums can be; with one step of 8 terms left out (a wrong tiling), not.
  const uint32_t K = 4096, N = 64;
  MatmulParams p{.M = 1, .N = N, .K = K};
  HostOperands o{std::vector<float>(K), std::vector<float>(size_t(K) * N), {}, {}, {}};
  uint64_t state = 0x9E3779B97F4A7C15ull;
  const auto next = [&] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return float((state >> 40) & 0x7FF) / 2048.0f;  // 11 bits in [0, 1), as fp16 holds: exact products
  };
  for (uint32_t k = 0; k < K / 2; ++k) {
    o.a[k] = next(), o.a[k + K / 2] = -o.a[k];
    for (uint32_t n = 0; n < N; ++n) o.b[size_t(k) * N + n] = o.b[size_t(k + K / 2) * N + n] = next();
  }
  std::vector<float> whole(N), parts(N), wrong(N);
  for (uint32_t n = 0; n < N; ++n) {
    std::vector<double> terms(K);
    for (uint32_t k = 0; k < K; ++k) terms[k] = double(o.a[k]) * double(o.b[size_t(k) * N + n]);
    whole[n] = truncated_sum(terms, 0, K);
    parts[n] = truncated_sum(terms, 0, K / 2) + truncated_sum(terms, K / 2, K);
    wrong[n] = whole[n] - float(std::accumulate(terms.begin() + 1024, terms.begin() + 1032, 0.0));
  }
  const auto d = disagreement(p, parts, whole);
  REQUIRE(d.share > 3);  // well past what IEEE sums wander
  const auto at_worst = summed_element(p, o, d.worst), at_far = summed_element(p, o, d.farthest);
  CHECK(at_worst.value == 0);
  CHECK(off_by(d.worst.got, at_worst) <= 1);
  CHECK(off_by(d.worst.want, at_worst) <= 1);
  CHECK(off_by(d.farthest.got, at_far) <= 1);
  CHECK(off_by(d.farthest.want, at_far) <= 1);
  const auto w = disagreement(p, wrong, whole);
  CHECK(off_by(w.farthest.got, summed_element(p, o, w.farthest)) > 1);
  CHECK(off_by(w.farthest.want, summed_element(p, o, w.farthest)) <= 1);
}
