// The kernels under ops::attention one by one, dispatched directly against plain CPU loops:
// the causal softmax and its backward over rows of scores. (attention_test.cpp checks what they compute together with the
// matmuls against the attention reference.)
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "check.h"
#include "gpu.h"
#include "half_check.h"
#include "shaders/attention.h"
#include "vk/commands.h"

namespace kernels_attention_kernels_test {

using namespace brigade;

namespace {

// A batch of `B` samples that starts at sample `first` of a token tensor of first + B samples:
// checks that the kernels honour `first` and leave the samples before it alone.
struct Dims {
  uint32_t first, B, T, NH, HS;
  uint32_t C() const { return NH * HS; }
  size_t tokens(uint32_t row) const { return size_t(first + B) * T * row; }
  size_t scores() const { return size_t(B) * NH * T * T; }
  size_t stats() const { return size_t(first + B) * NH * T; }
  std::string name() const {
    return "first=" + std::to_string(first) + " B=" + std::to_string(B) + " T=" + std::to_string(T) +
           " NH=" + std::to_string(NH) + " HS=" + std::to_string(HS);
  }
};

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "attention_softmax turns causal score rows into probabilities and lse") {
  // T=1: a single row of length 1; 13 and 70: row lengths that are no multiple of 8, and 70
  // rows, more than one workgroup's 64.
  for (const Dims& s : {Dims{0, 1, 1, 1, 4}, Dims{1, 2, 13, 3, 4}, Dims{0, 1, 70, 2, 4}}) {
    auto scores = test::random_vector(s.scores(), 64, -30.0f, 30.0f);
    const auto lse_prior = test::random_vector(s.stats(), 65);
    std::vector<double> want(s.scores()), want_lse(lse_prior.begin(), lse_prior.end());
    for (uint32_t bh = 0; bh < s.B * s.NH; ++bh)
      for (uint32_t i = 0; i < s.T; ++i) {
        const size_t row = (size_t(bh) * s.T + i) * s.T;
        double m = -INFINITY, sum = 0;
        for (uint32_t j = 0; j <= i; ++j) m = std::max(m, double(scores[row + j]));
        for (uint32_t j = 0; j <= i; ++j) sum += std::exp(scores[row + j] - m);
        for (uint32_t j = 0; j < s.T; ++j)
          want[row + j] = j <= i ? std::exp(scores[row + j] - m) / sum : 0.0;
        want_lse[(size_t(s.first) * s.NH + bh) * s.T + i] = m + std::log(sum);
      }
    vk::Buffer bs = test::to_device(device(), scores, "scores");
    vk::Buffer blse = test::to_device(device(), lse_prior, "lse");
    vk::Commands cmd(device(), "softmax");
    cmd.dispatch(device().kernel("attention_softmax"), {bs, blse},
                 shaders::AttentionSoftmaxPush{s.B, s.T, s.NH, s.HS, s.first},
                 {vk::groups_for(s.T, BRIGADE_WG_ATTENTION_ROWS), s.B * s.NH, 1});
    cmd.run();
    const auto got = test::to_host(bs);
    test::check_close(got, test::to_float(want), 1e-6, 1e-5, "P " + s.name());
    test::check_close(test::to_host(blse), test::to_float(want_lse), 1e-5, 1e-6, "lse " + s.name());
    size_t masked_nonzero = 0;
    for (size_t k = 0; k < got.size(); ++k) masked_nonzero += want[k] == 0.0 && got[k] != 0.0f;
    CHECK_MESSAGE(masked_nonzero == 0, s.name(), ": ", masked_nonzero, " masked entries not 0");
  }
}

TEST_CASE_FIXTURE(test::Gpu, "attention_softmax_backward turns scores and dP into P and dS") {
  for (const Dims& s : {Dims{0, 1, 1, 1, 3}, Dims{1, 2, 13, 3, 5}}) {
    const uint32_t C = s.C();
    const auto scores = test::random_vector(s.scores(), 71, -3.0f, 3.0f);
    const auto dp = test::random_vector(s.scores(), 72);
    const auto lse = test::random_vector(s.stats(), 73, 2.0f, 4.0f);
    const auto dy = test::random_vector(size_t(s.first + s.B) * s.T * C, 74);
    const auto y = test::random_vector(size_t(s.first + s.B) * s.T * C, 75);
    std::vector<double> want_p(s.scores()), want_ds(s.scores());
    for (uint32_t b = 0; b < s.B; ++b)
      for (uint32_t h = 0; h < s.NH; ++h)
        for (uint32_t i = 0; i < s.T; ++i) {
          const size_t token = (size_t(s.first + b) * s.T + i) * C + h * s.HS;
          double delta = 0;
          for (uint32_t d = 0; d < s.HS; ++d) delta += double(dy[token + d]) * y[token + d];
          const uint32_t bh = b * s.NH + h;
          const double lse_i = lse[(size_t(s.first) * s.NH + bh) * s.T + i];
          const size_t row = (size_t(bh) * s.T + i) * s.T;
          for (uint32_t j = 0; j < s.T; ++j) {
            const double p = j <= i ? std::exp(scores[row + j] - lse_i) : 0.0;
            want_p[row + j] = p;
            want_ds[row + j] = p * (dp[row + j] - delta);
          }
        }
    vk::Buffer bs = test::to_device(device(), scores, "scores"),
               bds = test::to_device(device(), dp, "dscores"),
               blse = test::to_device(device(), lse, "lse"), bdy = test::to_device(device(), dy, "dy"),
               by = test::to_device(device(), y, "y");
    vk::Commands cmd(device(), "softmax backward");
    cmd.dispatch(device().kernel("attention_softmax_backward"), {bs, bds, blse, bdy, by},
                 shaders::AttentionSoftmaxPush{s.B, s.T, s.NH, s.HS, s.first},
                 {vk::groups_for(s.T, BRIGADE_WG_ATTENTION_ROWS), s.B * s.NH, 1});
    cmd.run();
    test::check_close(test::to_host(bs), test::to_float(want_p), 1e-6, 1e-5, "P " + s.name());
    test::check_close(test::to_host(bds), test::to_float(want_ds), 1e-6, 1e-5, "dS " + s.name());
  }
}

// With whole quads of keys a row, the softmax kernels' 16-bit builds write P (and dS) packed
// to 16 bits for the products that read them so: the bits a pack of their fp32 values gives,
// and nothing over the scores.
TEST_CASE_FIXTURE(test::Gpu, "the softmax kernels write P and dS packed, as a pack of their fp32 values") {
  const Dims s{1, 2, 8, 2, 4};
  const uint32_t C = s.C();
  const auto scores = test::random_vector(s.scores(), 81, -3.0f, 3.0f), dp = test::random_vector(s.scores(), 82);
  const auto lse = test::random_vector(s.stats(), 83, 2.0f, 4.0f);
  const auto dy = test::random_vector(size_t(s.first + s.B) * s.T * C, 84);
  const auto y = test::random_vector(size_t(s.first + s.B) * s.T * C, 85);
  const shaders::AttentionSoftmaxPush push{s.B, s.T, s.NH, s.HS, s.first};
  const vk::Groups groups{vk::groups_for(s.T, BRIGADE_WG_ATTENTION_ROWS), s.B * s.NH, 1};
  vk::Device& dev = device();
  for (ops::Precision p : {ops::Precision::Bf16, ops::Precision::Fp16}) {
    const std::string what = ops::precision_name(p);
    const auto spec = [&](ops::Precision to) {
      return vk::Specialization().set(BRIGADE_ATTENTION_SPEC_VEC4, true).set(BRIGADE_ATTENTION_SPEC_FORMAT_P, uint32_t(to));
    };
    vk::Buffer bs = test::to_device(dev, scores, "scores"), hs = test::to_device(dev, scores, "scores, packed run");
    vk::Buffer bds = test::to_device(dev, dp, "dP"), hds = test::to_device(dev, dp, "dP, packed run");
    vk::Buffer blse = test::zeros(dev, s.stats(), "lse"), hlse = test::zeros(dev, s.stats(), "lse, packed run");
    vk::Buffer pp = test::zeros(dev, s.scores() / 2, "P packed"), pds = test::zeros(dev, s.scores() / 2, "dS packed");
    vk::Buffer bl = test::to_device(dev, lse, "lse in"), bdy = test::to_device(dev, dy, "dy"), by = test::to_device(dev, y, "y");
    vk::Commands cmd(dev, "softmax, packed");
    cmd.dispatch(dev.kernel("attention_softmax", spec(ops::Precision::Fp32)), {bs, blse}, push, groups);
    cmd.dispatch(dev.kernel(ops::format_kernel("attention_softmax", {p}), spec(p)), {hs, hlse, pp}, push, groups);
    cmd.run();
    CHECK_MESSAGE(test::to_host(pp) == test::packed(test::to_host(bs), p), what, ": P");
    CHECK_MESSAGE(test::to_host(hs) == scores, what, ": the scores left alone");
    CHECK_MESSAGE(test::to_host(hlse) == test::to_host(blse), what, ": lse");
    vk::Buffer bs2 = test::to_device(dev, scores, "scores"), hs2 = test::to_device(dev, scores, "scores, packed run");
    vk::Commands back(dev, "softmax backward, packed");
    back.dispatch(dev.kernel("attention_softmax_backward", spec(ops::Precision::Fp32)), {bs2, bds, bl, bdy, by}, push,
                  groups);
    back.dispatch(dev.kernel(ops::format_kernel("attention_softmax_backward", {p}), spec(p)), {hs2, hds, bl, bdy, by, pp, pds}, push,
                  groups);
    back.run();
    CHECK_MESSAGE(test::to_host(pp) == test::packed(test::to_host(bs2), p), what, ": P in the backward");
    CHECK_MESSAGE(test::to_host(pds) == test::packed(test::to_host(bds), p), what, ": dS");
    CHECK_MESSAGE(test::to_host(hds) == dp, what, ": dP left alone");
  }
}

}  // namespace kernels_attention_kernels_test
