// How `bench products` checks a candidate tiling's C against the default's
// (tools/brigade/product_check.h): the share of the difference allowed and where the worst
// element lies, and that element summed in double as the kernels' store defines it.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "product_check.h"
#include "ref/matmul.h"

using brigade::cli::disagreement;
using brigade::cli::exact_element;
using brigade::cli::HostOperands;
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
  const auto d = disagreement(p, got, want);
  CHECK(d.share > 1);
  CHECK(d.z == 1);
  CHECK(d.m == 1);
  CHECK(d.n == 3);
  CHECK(d.got == doctest::Approx(want[12 + 4 + 3] + 0.25));
  CHECK(d.want == want[12 + 4 + 3]);
  // A 16-bit C: two of its units in the last place on top.
  p.c_format = brigade::ops::Precision::Bf16;
  CHECK(disagreement(p, got, want).share < d.share);
  CHECK(brigade::cli::explained(p, d, 1.4) ==
        "1000.00x the difference allowed; the worst, C[1][1][3]: -1.25 against the default's -1.5, 1.4 summed in double");
  // NaN on one side only is no agreement at any size.
  got[5] = std::numeric_limits<float>::quiet_NaN();
  const auto nan = disagreement(p, got, want);
  CHECK(std::isinf(nan.share));
  p.batch = 1;  // one matrix: no batch index; no double sum known
  CHECK(brigade::cli::explained(p, nan, NAN) == "NaN on one side only; the worst, C[1][1]: nan against the default's 1.5");
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
      for (uint32_t n = 0; n < 6; ++n) CHECK(exact_element(p, o, z, m, n) == doctest::Approx(want[z * 30 + m * 6 + n]));

  // GELU's gradient scales the sum and bias by gelu'(pre); ReLU clips it.
  MatmulParams q{.M = 2, .N = 2, .K = 3, .epilogue = MatmulParams::Epilogue::GeluGrad};
  HostOperands g{{1, 2, 3, -1, -2, -3}, {1, 1, 1, 1, 1, 1}, {}, {}, {0.0f, 50.0f, -50.0f, 1.0f}};  // sums 6, 6, -6, -6
  CHECK(exact_element(q, g, 0, 0, 0) == doctest::Approx(6 * 0.5));   // gelu'(0) = 1/2
  CHECK(exact_element(q, g, 0, 0, 1) == doctest::Approx(6 * 1.0));   // gelu'(50) = 1
  CHECK(exact_element(q, g, 0, 1, 0) == doctest::Approx(0).epsilon(1e-12));  // gelu'(-50) = 0
  q.epilogue = MatmulParams::Epilogue::Relu;
  CHECK(exact_element(q, g, 0, 1, 0) == 0);
  CHECK(exact_element(q, g, 0, 0, 0) == 6);
}
