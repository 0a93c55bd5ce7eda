// On a CPU device the reducing kernels run one subgroup per workgroup. GPUs run several,
// combined through shared memory (shaders/workgroup_reduce.h); these tests force that path
// here by dispatching the kernels with wider workgroups than their launchers pick.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "check.h"
#include "gpu.h"
#include "shaders/loss.h"
#include "shaders/norm.h"
#include "shaders/workgroup_reduce.h"
#include "ref/batchnorm.h"
#include "ref/cross_entropy.h"
#include "ref/layernorm.h"
#include "vk/commands.h"

namespace kernels_workgroup_reduce_test {

using namespace brigade;

namespace {

// Several subgroups per workgroup, up to the widest the launchers use.
std::vector<uint32_t> wide_widths(const vk::Device& dev) {
  const uint32_t subgroup = dev.info().subgroup_size;
  std::vector<uint32_t> widths;
  for (uint32_t w = 2 * subgroup; w <= BRIGADE_WG_REDUCE_MAX; w *= 4) widths.push_back(w);
  return widths;
}

// `keep`: LayerNorm's elements of a row per lane (specialization constant 2), when not 0.
const vk::Kernel& wide(vk::Device& dev, const char* shader, uint32_t width, uint32_t keep = 0) {
  vk::Specialization spec;
  spec.set(0, width);
  if (keep) spec.set(2, keep);
  return dev.kernel(shader, spec);
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "layernorm rows reduce correctly across several subgroups") {
  vk::Device& dev = device();
  const uint32_t N = 9, C = 300;
  const auto x = test::random_vector(N * C, 1, 2.0f, 4.0f), w = test::random_vector(C, 2),
             b = test::random_vector(C, 3), dy = test::random_vector(N * C, 4);
  const auto xd = test::to_double(x), wd = test::to_double(w), bd = test::to_double(b),
             dyd = test::to_double(dy);
  std::vector<double> y(N * C), mean(N), rstd(N), dx(N * C, 0.0);
  ref::layernorm_forward(xd.data(), wd.data(), bd.data(), y.data(), mean.data(), rstd.data(), N, C);
  ref::layernorm_backward_data(dyd.data(), xd.data(), wd.data(), mean.data(), rstd.data(),
                               dx.data(), N, C);
  for (uint32_t width : wide_widths(dev)) {
    vk::Buffer bx = test::to_device(dev, x, "x"), bw = test::to_device(dev, w, "weight"),
               bb = test::to_device(dev, b, "bias"), bdy = test::to_device(dev, dy, "dy"),
               by = test::zeros(dev, N * C, "y"), bmean = test::zeros(dev, N, "mean"),
               brstd = test::zeros(dev, N, "rstd"), bdx = test::zeros(dev, N * C, "dx");
    vk::Commands cmd(dev, "layernorm");
    const shaders::LayerNormPush push{N, C, 1e-5f};
    // Float loads (C = 300 is a multiple of 4, but VEC4 is left off); 2 workgroups, so
    // each walks several rows.
    const uint32_t keep = (C + width - 1) / width;
    cmd.dispatch(wide(dev, "layernorm_forward", width, keep), {bx, bw, bb, by, bmean, brstd}, push, {2});
    cmd.dispatch(wide(dev, "layernorm_backward_data", width, keep), {bdy, bx, bw, bmean, brstd, bdx, bdx},
                 push, {2});
    cmd.run();
    const std::string at = " width " + std::to_string(width);
    test::check_close(test::to_host(by), test::to_float(y), 1e-5, 1e-5, "y" + at);
    test::check_close(test::to_host(bdx), test::to_float(dx), 1e-5, 1e-5, "dx" + at);
  }
}

TEST_CASE_FIXTURE(test::Gpu, "batchnorm channels reduce correctly across several subgroups") {
  vk::Device& dev = device();
  const uint32_t N = 3, C = 4, HW = 70;
  const size_t n = size_t(N) * C * HW;
  const auto x = test::random_vector(n, 1, 1.0f, 3.0f), w = test::random_vector(C, 2),
             b = test::random_vector(C, 3), dy = test::random_vector(n, 4);
  const auto xd = test::to_double(x), wd = test::to_double(w), bd = test::to_double(b),
             dyd = test::to_double(dy);
  std::vector<double> y(n), mean(C), rstd(C), dx(n, 0.0), dw(C, 0.0), db(C, 0.0);
  ref::batchnorm_forward_train(xd.data(), wd.data(), bd.data(), y.data(), mean.data(),
                               rstd.data(), N, C, HW);
  ref::batchnorm_backward(dyd.data(), xd.data(), wd.data(), mean.data(), rstd.data(), dx.data(),
                          dw.data(), db.data(), N, C, HW);
  for (uint32_t width : wide_widths(dev)) {
    vk::Buffer bx = test::to_device(dev, x, "x"), bw = test::to_device(dev, w, "weight"),
               bb = test::to_device(dev, b, "bias"), bdy = test::to_device(dev, dy, "dy"),
               by = test::zeros(dev, n, "y"), bmean = test::zeros(dev, C, "mean"),
               brstd = test::zeros(dev, C, "rstd"), bdx = test::zeros(dev, n, "dx"),
               bdw = test::zeros(dev, C, "dweight"), bdb = test::zeros(dev, C, "dbias"),
               stats = test::zeros(dev, C * sizeof(shaders::BatchNormStats) / 4, "stats");
    vk::Commands cmd(dev, "batchnorm");
    const shaders::BatchNormPush push{N, C, HW, 1e-5f, 1u};
    cmd.dispatch(wide(dev, "batchnorm_forward_train", width),
                 {bx, bw, bb, by, bmean, brstd, stats}, push, {C});
    cmd.dispatch(wide(dev, "batchnorm_backward", width),
                 {bdy, bx, bw, bmean, brstd, bdx, bdw, bdb}, push, {C});
    cmd.run();
    const std::string at = " width " + std::to_string(width);
    test::check_close(test::to_host(by), test::to_float(y), 1e-5, 1e-5, "y" + at);
    test::check_close(test::to_host(bdx), test::to_float(dx), 1e-5, 1e-5, "dx" + at);
    test::check_close(test::to_host(bdw), test::to_float(dw), 1e-5, 1e-5, "dweight" + at);
    test::check_close(test::to_host(bdb), test::to_float(db), 1e-5, 1e-5, "dbias" + at);
  }
}

TEST_CASE_FIXTURE(test::Gpu, "cross-entropy rows reduce correctly across several subgroups") {
  vk::Device& dev = device();
  const uint32_t N = 150, V = 300;
  auto logits = test::random_vector(N * V, 1, -4.0f, 4.0f);
  std::vector<int32_t> targets(N);
  for (uint32_t i = 0; i < N; ++i) targets[i] = int32_t((i * 37) % V);
  // Some rows tie their maximum across subgroups: argmax must keep the first.
  for (uint32_t i = 0; i < N; i += 5) {
    logits[i * V + (i % 7)] = logits[i * V + 299] = 9.0f;
    targets[i] = int32_t(i % 10 < 5 ? i % 7 : 299);
  }
  const auto ld = test::to_double(logits);
  double loss = 0;
  uint32_t correct = 0;
  ref::cross_entropy_forward(ld.data(), targets.data(), loss, N, V, N);
  ref::cross_entropy_accuracy(logits.data(), targets.data(), correct, N, V);
  for (uint32_t width : wide_widths(dev)) {
    vk::Buffer bl = test::to_device(dev, logits, "logits"), bt = test::to_device(dev, targets, "targets"),
               rows = test::zeros(dev, 2 * N, "rows"), bloss = test::zeros(dev, 1, "loss"),
               bcorrect = test::zeros(dev, 1, "correct");
    vk::Commands cmd(dev, "cross-entropy");
    const shaders::CrossEntropyPush push{N, V, N};
    cmd.dispatch(wide(dev, "cross_entropy_forward", width), {bl, rows}, push, {N});
    cmd.dispatch(wide(dev, "cross_entropy_loss", width), {bl, bt, rows, bloss}, push, {1});
    cmd.dispatch(wide(dev, "cross_entropy_accuracy", width), {bl, bt, bcorrect}, push, {N});
    cmd.run();
    uint32_t got = 0;
    vk::download(bcorrect, &got, 4);
    const std::string at = " width " + std::to_string(width);
    test::check_close(test::to_host(bloss), std::vector<float>{float(loss)}, 1e-6, 1e-6, "loss" + at);
    CHECK_MESSAGE(got == correct, "correct", at, ": ", got, " want ", correct);
  }
}

}  // namespace kernels_workgroup_reduce_test
