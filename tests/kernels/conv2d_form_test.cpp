// Which form a convolution runs in on a 16-bit x (ops::conv2d_form): where Winograd's form
// pays, a device whose matrix units multiply x's type runs the matrix form instead, its
// products on those units (Winograd's would read its transformed operands rounded to 16
// bits); elsewhere Winograd's, as on an fp32 x. Checked by the bits each pass gives against
// the passes run in each form by name, plain and with the ReLU and pooling folded in. The
// matrix units' side runs in tools/coopmat-check.sh (Mesa 26's lavapipe).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "check.h"
#include "gpu.h"
#include "half_check.h"
#include "ops/conv2d.h"
#include "ops/form.h"
#include "ops/conv2d_pool.h"
#include "ops/conv2d_winograd.h"
#include "vk/commands.h"

namespace kernels_conv2d_form_test {

using namespace brigade;
using ops::Conv2dShape;
using ops::Form;
using ops::Precision;
using test::check_bits;

namespace {

// 16 input channels (Winograd's form pays), 6 x 8 outputs: 48 pixels, whole quads of columns.
const Conv2dShape kShape{2, 16, 6, 8, 8, 3, 3, 1, 1, 1, 1};

struct Passes {
  std::vector<float> y, dx, dweight;
};

// The forward and the two gradients on the 16-bit x `hx`, in `form` (nothing: the device's).
Passes run(vk::Device& dev, vk::View hx, vk::View w, vk::View dy, const Conv2dShape& s, std::optional<Form> form,
           Precision p) {
  auto y = test::zeros(dev, s.y_size(), "y"), dx = test::zeros(dev, s.x_size(), "dx");
  auto dw = test::zeros(dev, s.weight_size(), "dweight");
  const uint64_t floats = std::max(ops::conv2d_scratch_floats(s, s.n, p), ops::winograd::scratch_floats(s, s.n));
  auto scratch = test::zeros(dev, floats, "scratch", vk::Category::Scratch);
  const ops::Formats f{p, Precision::Fp32};
  vk::Commands cmd(dev, "conv2d in a form");
  ops::conv2d_forward(cmd, hx, w, std::nullopt, y, s, scratch, form, f);
  ops::conv2d_backward(cmd, dy, hx, w, vk::View(dx), vk::View(dw), std::nullopt, s, scratch, form, f);
  cmd.run();
  return {test::to_host(y), test::to_host(dx), test::to_host(dw)};
}

// max(relu(.)) over each 2x2 window of (N, C, H, W) planes, as the pooling fold stores it.
std::vector<float> pooled(const std::vector<float>& y, const Conv2dShape& s) {
  const uint32_t ph = s.out_h() / 2, pw = s.out_w() / 2;
  std::vector<float> out(size_t(s.n) * s.oc * ph * pw);
  for (size_t plane = 0; plane < size_t(s.n) * s.oc; ++plane)
    for (uint32_t i = 0; i < ph; ++i)
      for (uint32_t j = 0; j < pw; ++j) {
        float m = 0.0f;
        for (uint32_t a = 0; a < 2; ++a)
          for (uint32_t b = 0; b < 2; ++b)
            m = std::max(m, y[(plane * s.out_h() + 2 * i + a) * s.out_w() + 2 * j + b]);
        out[(plane * ph + i) * pw + j] = m;
      }
  return out;
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "conv2d on a 16-bit x takes the matrix form where the matrix units multiply its type, Winograd's elsewhere") {
  vk::Device& dev = device();
  const Conv2dShape& s = kShape;
  REQUIRE(ops::winograd::pays(s));
  uint32_t seed = 2100;
  for (Precision p : {Precision::Bf16, Precision::Fp16}) {
    const bool units = ops::conv2d_matrix_units(dev.info(), s, p);
    const std::string what = std::string(ops::precision_name(p)) + (units ? ", matrix units" : ", no matrix units");
    // The fp32 x's form is Winograd's wherever the device's is the matrix form.
    const Form device_form = ops::form_for(dev.info());
    CHECK(ops::conv2d_form(dev.info(), s) == (device_form == Form::Matrix ? Form::Winograd : device_form));
    if (device_form != Form::Matrix) {  // SwiftShader: the direct form, which takes no 16-bit x
      CHECK_MESSAGE(ops::conv2d_form(dev.info(), s, p) == device_form, what);
      continue;
    }
    const Form want = units ? Form::Matrix : Form::Winograd, other = units ? Form::Winograd : Form::Matrix;
    CHECK_MESSAGE(ops::conv2d_form(dev.info(), s, p) == want, what);
    const std::vector<float> x = test::rounded(test::random_vector(s.x_size(), seed += 4), p);
    const std::vector<float> w = test::random_vector(s.weight_size(), seed + 1);
    const std::vector<float> dy = test::random_vector(s.y_size(), seed + 2);
    auto hx = test::to_device(dev, test::packed(x, p), "x, 16 bits"), bw = test::to_device(dev, w, "weight");
    auto bdy = test::to_device(dev, dy, "dy");
    const Passes got = run(dev, hx, bw, bdy, s, std::nullopt, p), named = run(dev, hx, bw, bdy, s, want, p),
                 apart = run(dev, hx, bw, bdy, s, other, p);
    check_bits(got.y, named.y, what + ": y");
    check_bits(got.dx, named.dx, what + ": dx");
    check_bits(got.dweight, named.dweight, what + ": dweight");
    CHECK_MESSAGE(got.y != apart.y, what, ": y differs from the other form's");

    // With the ReLU and 2x2 pooling folded in (the tiles fold, 1152 weights): the pooled y of
    // the same form's output, stored in 16 bits, and the gradients of the same form's passes on
    // dy spread back.
    REQUIRE_FALSE(ops::conv2d_pool_fits(s));
    const uint64_t windows = uint64_t(s.n) * s.oc * (s.out_h() / 2) * (s.out_w() / 2);
    const std::vector<float> pdy = test::random_vector(windows, seed + 3);
    auto bpdy = test::to_device(dev, pdy, "pooled dy"), py = test::zeros(dev, windows, "pooled y");
    auto codes = test::zeros(dev, ops::conv2d_pool_code_words(s) * s.n, "codes");
    auto pdx = test::zeros(dev, s.x_size(), "dx"), pdw = test::zeros(dev, s.weight_size(), "dweight");
    auto scratch = test::zeros(dev, ops::conv2d_pool_scratch_floats(s, s.n, p), "scratch", vk::Category::Scratch);
    auto spread = test::zeros(dev, ops::conv2d_pool_scratch_floats(s, s.n, p), "scratch", vk::Category::Scratch);
    const ops::Formats f{p, Precision::Fp32};
    vk::Commands cmd(dev, "conv2d pooled in a form");
    ops::conv2d_pool_forward(cmd, hx, bw, std::nullopt, py, codes, s, scratch, {p, p});
    ops::conv2d_pool_backward(cmd, bpdy, codes, hx, bw, vk::View(pdx), vk::View(pdw), std::nullopt, s, scratch, f);
    ops::conv2d_pool_unpool(cmd, bpdy, codes, s, spread, p);  // dy spread back, at the start
    cmd.run();
    std::vector<float> words = test::to_host(py);
    words.resize((windows + 1) / 2);
    check_bits(words, test::packed(pooled(named.y, s), p), what + ": pooled y");
    std::vector<float> dense = test::to_host(spread);
    dense.resize(s.y_size());
    const Passes spread_back = run(dev, hx, bw, test::to_device(dev, dense, "dy spread back"), s, want, p);
    check_bits(test::to_host(pdx), spread_back.dx, what + ": pooled dx");
    check_bits(test::to_host(pdw), spread_back.dweight, what + ": pooled dweight");
  }
}

}  // namespace kernels_conv2d_form_test
