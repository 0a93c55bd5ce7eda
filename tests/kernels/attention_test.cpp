#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "check.h"
#include "gpu.h"
#include "grid_cap.h"
#include "ops/attention.h"
#include "ref/attention.h"
#include "util/error.h"
#include "vk/commands.h"

namespace kernels_attention_test {

using namespace brigade;

namespace {

struct Shape {
  uint32_t B, T, C, NH;
  size_t qkv() const { return size_t(B) * T * 3 * C; }
  size_t y() const { return size_t(B) * T * C; }
  size_t stats() const { return size_t(B) * NH * T; }
  // Scratch for `samples` samples at once (all of them by default).
  size_t scratch(uint32_t samples = 0) const {
    return ops::attention_scratch_floats(samples ? samples : B, T, C, NH);
  }
  std::string name() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C) +
           " NH=" + std::to_string(NH);
  }
};

// Odd lengths (1, 7, 33, and 70 and 130: more than one workgroup of rows), head sizes that are
// not powers of two: 36/3 = 12 (read as vec4s) and 30/2 = 15 (read per float), and the GPT
// presets' head of 64 channels.
const Shape kShapes[] = {{1, 1, 8, 2}, {2, 7, 36, 3}, {1, 33, 30, 2}, {2, 70, 16, 4}, {1, 130, 128, 2}};

struct Outputs {
  std::vector<float> y, lse;
};

// Every form runs every case: the matrix products (the default), the row kernels
// (SwiftShader's, ops/form.h) and the row kernels staged (Form::Fused), on every driver the
// suite runs on.
using ops::Form;
constexpr Form kForms[] = {Form::Matrix, Form::Direct, Form::Fused};
const char* name(Form f) { return f == Form::Matrix ? "matrix form" : f == Form::Direct ? "row kernels" : "fused"; }

// `samples`: the samples the scratch holds at once (0: all of them); `floats`, where given, its
// size instead.
Outputs gpu_forward(vk::Device& dev, const std::vector<float>& qkv, const Shape& s,
                    uint32_t samples = 0, Form form = Form::Matrix, size_t floats = 0) {
  vk::Buffer bqkv = test::to_device(dev, qkv, "qkv");
  vk::Buffer by = test::zeros(dev, s.y(), "y"), blse = test::zeros(dev, s.stats(), "lse");
  vk::Buffer scratch = test::zeros(dev, floats ? floats : s.scratch(samples), "scratch");
  vk::Commands cmd(dev, "attention forward");
  ops::attention_forward(cmd, bqkv, by, blse, scratch, s.B, s.T, s.C, s.NH, form);
  cmd.run();
  return {test::to_host(by), test::to_host(blse)};
}

// dqkv starts as `dqkv` (never read) and comes back holding the gradient.
std::vector<float> gpu_backward(vk::Device& dev, const std::vector<float>& qkv, const Outputs& fwd,
                                const std::vector<float>& dy, const std::vector<float>& dqkv,
                                const Shape& s, uint32_t samples = 0, Form form = Form::Matrix, size_t floats = 0) {
  vk::Buffer bqkv = test::to_device(dev, qkv, "qkv"), by = test::to_device(dev, fwd.y, "y"),
             blse = test::to_device(dev, fwd.lse, "lse"), bdy = test::to_device(dev, dy, "dy"),
             bdqkv = test::to_device(dev, dqkv, "dqkv"),
             scratch = test::zeros(dev, floats ? floats : s.scratch(samples), "scratch");
  vk::Commands cmd(dev, "attention backward");
  ops::attention_backward(cmd, bqkv, by, blse, bdy, bdqkv, scratch, s.B, s.T, s.C, s.NH, form);
  cmd.run();
  return test::to_host(bdqkv);
}

// The double-precision reference forward.
struct RefOutputs {
  std::vector<double> y, lse;
};
RefOutputs ref_forward(const std::vector<double>& qkv, const Shape& s) {
  RefOutputs out{std::vector<double>(s.y()), std::vector<double>(s.stats())};
  ref::attention_forward(qkv.data(), out.y.data(), out.lse.data(), s.B, s.T, s.C, s.NH);
  return out;
}

// Multiplies the q and k parts of qkv by `factor`, leaving v alone.
void scale_qk(std::vector<float>& qkv, const Shape& s, float factor) {
  for (size_t i = 0; i < qkv.size(); ++i)
    if (i % (3 * s.C) < 2 * s.C) qkv[i] *= factor;
}

// The largest |q_t.k_j| / sqrt(HS) over the causal pairs.
double max_score(const std::vector<float>& qkv, const Shape& s) {
  const uint32_t HS = s.C / s.NH;
  double top = 0;
  for (uint32_t b = 0; b < s.B; ++b)
    for (uint32_t h = 0; h < s.NH; ++h)
      for (uint32_t t = 0; t < s.T; ++t)
        for (uint32_t j = 0; j <= t; ++j) {
          const float* q = &qkv[(size_t(b) * s.T + t) * 3 * s.C + h * HS];
          const float* k = &qkv[(size_t(b) * s.T + j) * 3 * s.C + s.C + h * HS];
          double dot = 0;
          for (uint32_t d = 0; d < HS; ++d) dot += double(q[d]) * k[d];
          top = std::max(top, std::abs(dot) / std::sqrt(double(HS)));
        }
  return top;
}

// Tensors placed inside larger buffers, between guard regions of a sentinel value, as the
// pipeline places activations: checks view offsets and that nothing outside a view changes.
// 64 floats: 256 bytes, the largest storage-offset alignment Vulkan allows (SwiftShader's).
constexpr size_t kGuard = 64;
constexpr float kSentinel = 1234.5f;

struct Guarded {
  vk::Buffer buffer;
  size_t n;
  vk::View view() const { return vk::View(buffer, kGuard * 4, n * 4); }
};

Guarded guarded(vk::Device& dev, const std::vector<float>& data, const std::string& name) {
  std::vector<float> all(data.size() + 2 * kGuard, kSentinel);
  std::copy(data.begin(), data.end(), all.begin() + kGuard);
  return {test::to_device(dev, all, name), data.size()};
}

// The view's contents; CHECKs that the guards still hold the sentinel.
std::vector<float> inside(const Guarded& g, const std::string& what) {
  const auto all = test::to_host(g.buffer);
  size_t touched = 0;
  for (size_t i = 0; i < kGuard; ++i)
    touched += (all[i] != kSentinel) + (all[kGuard + g.n + i] != kSentinel);
  CHECK_MESSAGE(touched == 0, what, ": ", touched, " floats outside the view changed");
  return {all.begin() + kGuard, all.begin() + kGuard + g.n};
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "attention forward matches the CPU reference for odd lengths and head sizes") {
  for (const Form form : kForms) {
    CAPTURE(name(form));
    for (const Shape& s : kShapes) {
      const auto qkv = test::random_vector(s.qkv(), s.T + s.C);
      const Outputs gpu = gpu_forward(device(), qkv, s, 0, form);
      const RefOutputs want = ref_forward(test::to_double(qkv), s);
      test::check_close(gpu.y, test::to_float(want.y), 2e-6, 2e-5, "y " + s.name());
      test::check_close(gpu.lse, test::to_float(want.lse), 2e-6, 2e-6, "lse " + s.name());
    }
  }
}

TEST_CASE_FIXTURE(test::Gpu, "attention forward stays finite and accurate when scores reach a thousand") {
  for (const Form form : kForms) {
    CAPTURE(name(form));
    const Shape s{2, 40, 32, 2};
    auto qkv = test::random_vector(s.qkv(), 7);
    scale_qk(qkv, s, 40.0f);
    const RefOutputs want = ref_forward(test::to_double(qkv), s);
    REQUIRE(max_score(qkv, s) > 1000.0);
    const Outputs gpu = gpu_forward(device(), qkv, s, 0, form);
    CHECK(std::all_of(gpu.y.begin(), gpu.y.end(), [](float x) { return std::isfinite(x); }));
    CHECK(std::all_of(gpu.lse.begin(), gpu.lse.end(), [](float x) { return std::isfinite(x); }));
    test::check_close(gpu.y, test::to_float(want.y), 3e-4, 1e-3, "y");
    test::check_close(gpu.lse, test::to_float(want.lse), 5e-4, 1e-6, "lse");
  }
}

TEST_CASE_FIXTURE(test::Gpu, "attention output at time t ignores keys and values after t") {
  for (const Form form : kForms) {
    CAPTURE(name(form));
    const Shape s{2, 33, 24, 3};
    const auto qkv = test::random_vector(s.qkv(), 11);
    const Outputs before = gpu_forward(device(), qkv, s, 0, form);
    for (uint32_t t0 : {0u, 9u, 31u}) {
      // New keys and values at every position after t0; queries unchanged.
      auto changed = qkv;
      const auto noise = test::random_vector(s.qkv(), 100 + t0);
      for (uint32_t b = 0; b < s.B; ++b)
        for (uint32_t t = t0 + 1; t < s.T; ++t)
          for (uint32_t c = s.C; c < 3 * s.C; ++c) {
            const size_t i = (size_t(b) * s.T + t) * 3 * s.C + c;
            changed[i] = noise[i];
          }
      const Outputs after = gpu_forward(device(), changed, s, 0, form);
      size_t moved_past = 0, moved_before = 0;
      for (uint32_t b = 0; b < s.B; ++b)
        for (uint32_t t = 0; t < s.T; ++t)
          for (uint32_t c = 0; c < s.C; ++c) {
            const size_t i = (size_t(b) * s.T + t) * s.C + c;
            (t <= t0 ? moved_before : moved_past) += before.y[i] != after.y[i];
          }
      size_t lse_moved = 0;
      for (uint32_t bh = 0; bh < s.B * s.NH; ++bh)
        for (uint32_t t = 0; t <= t0; ++t) lse_moved += before.lse[bh * s.T + t] != after.lse[bh * s.T + t];
      CHECK_MESSAGE(moved_before == 0, "t0=", t0, ": ", moved_before, " outputs at t <= t0 changed");
      CHECK_MESSAGE(lse_moved == 0, "t0=", t0, ": ", lse_moved, " lse values at t <= t0 changed");
      // The change is visible where it should be, so the comparison above can see one.
      CHECK_MESSAGE(moved_past > 0, "t0=", t0, ": outputs after t0 did not change");
    }
  }
}

TEST_CASE_FIXTURE(test::Gpu, "attention backward writes the CPU reference gradient into dqkv") {
  for (const Form form : kForms) {
    CAPTURE(name(form));
    for (const Shape& s : kShapes) {
      const auto qkv = test::random_vector(s.qkv(), s.T * 3 + s.C);
      const auto dy = test::random_vector(s.y(), s.T + 5);
      const auto prior = test::random_vector(s.qkv(), s.C + 9);  // what dqkv held: not read
      const RefOutputs fwd = ref_forward(test::to_double(qkv), s);
      const auto qkv_d = test::to_double(qkv), dy_d = test::to_double(dy);
      std::vector<double> want(s.qkv(), 0.0);
      ref::attention_backward(qkv_d.data(), fwd.y.data(), fwd.lse.data(), dy_d.data(), want.data(),
                              s.B, s.T, s.C, s.NH);
      const auto got = gpu_backward(device(), qkv, {test::to_float(fwd.y), test::to_float(fwd.lse)},
                                    dy, prior, s, 0, form);
      test::check_close(got, test::to_float(want), 5e-6, 5e-5, "dqkv " + s.name());
    }
  }
}

TEST_CASE_FIXTURE(test::Gpu, "attention backward stays accurate when scores reach a thousand") {
  for (const Form form : kForms) {
    CAPTURE(name(form));
    const Shape s{1, 40, 32, 2};
    auto qkv = test::random_vector(s.qkv(), 13);
    scale_qk(qkv, s, 40.0f);
    REQUIRE(max_score(qkv, s) > 1000.0);
    const auto dy = test::random_vector(s.y(), 14);
    const auto prior = test::random_vector(s.qkv(), 15);
    const Outputs fwd = gpu_forward(device(), qkv, s, 0, form);
    const RefOutputs ref_fwd = ref_forward(test::to_double(qkv), s);
    const auto qkv_d = test::to_double(qkv), dy_d = test::to_double(dy);
    std::vector<double> grad(s.qkv(), 0.0);
    ref::attention_backward(qkv_d.data(), ref_fwd.y.data(), ref_fwd.lse.data(), dy_d.data(),
                            grad.data(), s.B, s.T, s.C, s.NH);
    std::vector<float> want(s.qkv());
    for (size_t i = 0; i < want.size(); ++i) want[i] = float(grad[i]);
    const auto got = gpu_backward(device(), qkv, fwd, dy, prior, s, 0, form);
    CHECK(std::all_of(got.begin(), got.end(), [](float x) { return std::isfinite(x); }));
    // fp32 scores near 1e3 carry absolute errors near 1e-4, which become relative errors of
    // the recomputed probabilities: a tolerance relative to the gradients' scale.
    test::check_close(got, want, 2e-4 * max_abs(grad), 2e-4, "dqkv");
  }
}

TEST_CASE("attention CPU backward matches finite differences of sum(y * r)") {
  for (const Shape& s : {Shape{1, 4, 6, 2}, Shape{2, 5, 6, 3}, Shape{1, 3, 4, 1}}) {
    const auto qkv = test::to_double(test::random_vector(s.qkv(), 21 + s.T));
    const auto r = test::to_double(test::random_vector(s.y(), 22 + s.T));
    const auto loss = [&](const std::vector<double>& x) {
      const RefOutputs out = ref_forward(x, s);
      double sum = 0;
      for (size_t i = 0; i < out.y.size(); ++i) sum += out.y[i] * r[i];
      return sum;
    };
    const RefOutputs fwd = ref_forward(qkv, s);
    std::vector<double> grad(s.qkv(), 0.0);
    ref::attention_backward(qkv.data(), fwd.y.data(), fwd.lse.data(), r.data(), grad.data(), s.B,
                            s.T, s.C, s.NH);
    test::check_gradient(loss, qkv, grad, 1e-5, 1e-7, "dqkv " + s.name());
  }
}

TEST_CASE_FIXTURE(test::Gpu, "attention rejects widths that do not split into heads") {
  vk::Device& dev = device();
  vk::Buffer qkv = test::zeros(dev, 3 * 1024, "qkv"), y = test::zeros(dev, 1024, "y"),
             lse = test::zeros(dev, 1024, "lse"), scratch = test::zeros(dev, 2048, "scratch");
  vk::Commands cmd(dev, "attention errors");
  CHECK_THROWS_WITH_AS(ops::attention_forward(cmd, qkv, y, lse, scratch, 1, 2, 10, 3),
                       doctest::Contains("C=10 must be a positive multiple of the number of heads NH=3"),
                       UserError);
  CHECK_THROWS_WITH_AS(ops::attention_forward(cmd, qkv, y, lse, scratch, 1, 100, 16, 2),
                       doctest::Contains("attention qkv 'qkv' view holds"), InternalError);
  // T=64, C=16, NH=4: one head's forward needs its 64*64 scores, more than 2048 floats.
  CHECK_THROWS_WITH_AS(ops::attention_forward(cmd, qkv, y, lse, scratch, 1, 64, 16, 4, Form::Matrix),
                       doctest::Contains("attention scratch of 2048 floats is under the 4096 one head needs"),
                       InternalError);
  // The row kernels keep a head's row in registers: at most 256 channels per head.
  CHECK_THROWS_WITH_AS(ops::attention_forward(cmd, qkv, y, lse, scratch, 1, 1, 514, 2, Form::Direct),
                       doctest::Contains("head size C/NH=257 is over the row kernels' limit of 256"),
                       UserError);
}

TEST_CASE_FIXTURE(test::Gpu, "attention reads and writes only inside views at an offset") {
  for (const Form form : kForms) {
    CAPTURE(name(form));
    // HS 12: vec4 rows; HS 15: per-float rows.
    for (const Shape& s : {Shape{2, 7, 36, 3}, Shape{1, 9, 30, 2}}) {
      vk::Device& dev = device();
      const auto qkv = test::random_vector(s.qkv(), 31), dy = test::random_vector(s.y(), 32);
      const auto prior = test::random_vector(s.qkv(), 33);
      const Guarded bqkv = guarded(dev, qkv, "qkv"), by = guarded(dev, std::vector<float>(s.y()), "y"),
                    blse = guarded(dev, std::vector<float>(s.stats()), "lse"),
                    bdy = guarded(dev, dy, "dy"), bdqkv = guarded(dev, prior, "dqkv"),
                    scratch = guarded(dev, std::vector<float>(s.scratch()), "scratch");
      vk::Commands cmd(dev, "attention at offsets");
      ops::attention_forward(cmd, bqkv.view(), by.view(), blse.view(), scratch.view(), s.B, s.T, s.C,
                             s.NH, form);
      ops::attention_backward(cmd, bqkv.view(), by.view(), blse.view(), bdy.view(), bdqkv.view(),
                              scratch.view(), s.B, s.T, s.C, s.NH, form);
      cmd.run();

      const auto qkv_d = test::to_double(qkv), dy_d = test::to_double(dy);
      const RefOutputs fwd = ref_forward(qkv_d, s);
      std::vector<double> want(s.qkv(), 0.0);
      ref::attention_backward(qkv_d.data(), fwd.y.data(), fwd.lse.data(), dy_d.data(), want.data(),
                              s.B, s.T, s.C, s.NH);
      test::check_close(inside(by, "y"), test::to_float(fwd.y), 2e-6, 2e-5, "y " + s.name());
      test::check_close(inside(blse, "lse"), test::to_float(fwd.lse), 2e-6, 2e-6, "lse " + s.name());
      test::check_close(inside(bdqkv, "dqkv"), test::to_float(want), 5e-6, 5e-5, "dqkv " + s.name());
      inside(bqkv, "qkv");
      inside(bdy, "dy");
      inside(scratch, "scratch");
    }
  }
}

namespace {

// Attention on `s` (inputs of seeds seed to seed + 2) whole, then in chunks of each of `chunks`
// (samples a chunk, and floats of scratch; 0: the whole batch's): the same products on the same
// values chunk by chunk, so the same bits.
void check_chunks_give_whole_bits(vk::Device& dev, const Shape& s, uint32_t seed,
                                  const std::vector<std::pair<uint32_t, size_t>>& chunks) {
  const auto qkv = test::random_vector(s.qkv(), seed), dy = test::random_vector(s.y(), seed + 1);
  const auto prior = test::random_vector(s.qkv(), seed + 2);
  const Outputs whole = gpu_forward(dev, qkv, s);
  const auto whole_grad = gpu_backward(dev, qkv, whole, dy, prior, s);
  for (const auto& chunk : chunks) {
    const uint32_t samples = chunk.first;  // not bound: CAPTURE's lambda cannot take a binding in clang 14
    const size_t floats = chunk.second;
    CAPTURE(samples);
    CAPTURE(floats);
    const Outputs chunked = gpu_forward(dev, qkv, s, samples, Form::Matrix, floats);
    CHECK(chunked.y == whole.y);
    CHECK(chunked.lse == whole.lse);
    CHECK(gpu_backward(dev, qkv, whole, dy, prior, s, samples, Form::Matrix, floats) == whole_grad);
  }
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "attention works through the samples in chunks when the scratch holds fewer") {
  check_chunks_give_whole_bits(device(), Shape{3, 9, 12, 2}, 41, {{1, 0}, {2, 0}});
}

TEST_CASE_FIXTURE(test::Gpu, "attention works through one sample's heads in chunks when the scratch holds fewer") {
  // Three heads a sample, the scratch for one head (chunks of one) and for two (a chunk of two
  // heads, then one starting at head 2): one sample's scores may be more than a kernel binds.
  const Shape s{2, 9, 12, 3};
  const uint64_t one_head = ops::attention_scratch_within(s.B, s.T, s.C, s.NH, ops::Precision::Fp32, 1);
  REQUIRE(one_head < s.scratch(1));
  std::vector<std::pair<uint32_t, size_t>> chunks;
  for (const uint64_t cap : {uint64_t(1), 2 * one_head * 4})
    chunks.push_back({0, ops::attention_scratch_within(s.B, s.T, s.C, s.NH, ops::Precision::Fp32, cap)});
  check_chunks_give_whole_bits(device(), s, 44, chunks);
}

TEST_CASE_FIXTURE(test::Gpu, "attention walks samples and heads past a dispatch's grid in further dispatches") {
  // A grid of 2 workgroups a dimension: 5 samples of 2 heads on the row kernels' z, and the
  // matrix form's products and softmax in chunks of one sample, against the CPU reference and
  // the same bits as in one dispatch.
  const Shape s{5, 9, 12, 2};
  const auto qkv = test::random_vector(s.qkv(), 47), dy = test::random_vector(s.y(), 48);
  const auto prior = test::random_vector(s.qkv(), 49);
  const auto qkv_d = test::to_double(qkv), dy_d = test::to_double(dy);
  const RefOutputs fwd = ref_forward(qkv_d, s);
  std::vector<double> want(s.qkv(), 0.0);
  ref::attention_backward(qkv_d.data(), fwd.y.data(), fwd.lse.data(), dy_d.data(), want.data(), s.B, s.T, s.C, s.NH);
  for (const Form form : kForms) {
    CAPTURE(name(form));
    const Outputs whole = gpu_forward(device(), qkv, s, 0, form);
    const auto whole_grad = gpu_backward(device(), qkv, whole, dy, prior, s, 0, form);
    const test::GridCap two(2);
    const Outputs capped = gpu_forward(device(), qkv, s, 0, form);
    test::check_close(capped.y, test::to_float(fwd.y), 2e-6, 2e-5, "y");
    test::check_close(capped.lse, test::to_float(fwd.lse), 2e-6, 2e-6, "lse");
    CHECK(capped.y == whole.y);
    CHECK(capped.lse == whole.lse);
    const auto grad = gpu_backward(device(), qkv, whole, dy, prior, s, 0, form);
    test::check_close(grad, test::to_float(want), 5e-6, 5e-5, "dqkv");
    CHECK(grad == whole_grad);
  }
}

TEST_CASE_FIXTURE(test::Gpu, "fused attention gives the row kernels' bits across blocks of rows") {
  // One row, a partial block, whole workgroups, a row past them, several of each, one head of
  // 64 channels and heads whose rows are no whole vec4s.
  for (const Shape& s : {Shape{1, 1, 8, 2}, Shape{2, 7, 12, 3}, Shape{1, 64, 16, 1}, Shape{2, 65, 16, 2},
                         Shape{1, 200, 64, 1}, Shape{1, 131, 18, 3}}) {
    CAPTURE(s.name());
    const auto qkv = test::random_vector(s.qkv(), s.T + 11), dy = test::random_vector(s.y(), s.T + 12);
    const auto prior = test::random_vector(s.qkv(), s.T + 13);
    const Outputs rows = gpu_forward(device(), qkv, s, 0, Form::Direct), fused = gpu_forward(device(), qkv, s, 0, Form::Fused);
    CHECK(fused.y == rows.y);
    CHECK(fused.lse == rows.lse);
    CHECK(gpu_backward(device(), qkv, rows, dy, prior, s, 0, Form::Fused) ==
          gpu_backward(device(), qkv, rows, dy, prior, s, 0, Form::Direct));
  }
}

TEST_CASE_FIXTURE(test::Gpu, "attention gives the same bits run to run") {
  for (const Form form : kForms) {
    CAPTURE(name(form));
    const Shape s{2, 70, 16, 4};
    const auto qkv = test::random_vector(s.qkv(), 51), dy = test::random_vector(s.y(), 52);
    const auto prior = test::random_vector(s.qkv(), 53);
    const Outputs first = gpu_forward(device(), qkv, s, 0, form), second = gpu_forward(device(), qkv, s, 0, form);
    CHECK(first.y == second.y);
    CHECK(first.lse == second.lse);
    CHECK(gpu_backward(device(), qkv, first, dy, prior, s, 0, form) ==
          gpu_backward(device(), qkv, first, dy, prior, s, 0, form));
  }
}

}  // namespace kernels_attention_test
