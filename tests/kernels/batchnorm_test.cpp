#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "check.h"
#include "gpu.h"
#include "half_check.h"
#include "shaders/norm.h"
#include "ops/batchnorm.h"
#include "ref/batchnorm.h"
#include "util/error.h"
#include "vk/commands.h"

namespace kernels_batchnorm_test {

using namespace brigade;
using ops::Precision;
using test::check_bits, test::packed, test::rounded;

namespace {

struct Shape {
  uint32_t N, C, HW;
  size_t size() const { return size_t(N) * C * HW; }
};
// HW = 1 (as after global pooling), N = 1, odd sizes, and a 14x14 feature map; planes walked
// a value, a pair and a quad at a time, a lane's step crossing planes (8 lanes of 4 values
// on lavapipe: 32 = 2 * 12 + 8).
const Shape kShapes[] = {{2, 3, 25}, {4, 8, 49}, {3, 5, 1}, {1, 4, 15}, {16, 4, 196}, {3, 2, 6}, {5, 3, 12}};

std::string name(const Shape& s) {
  return "N=" + std::to_string(s.N) + " C=" + std::to_string(s.C) + " HW=" + std::to_string(s.HW);
}

vk::Buffer stats_buffer(vk::Device& dev, uint32_t C) {
  return test::zeros(dev, C * sizeof(shaders::BatchNormStats) / 4, "batch statistics");
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "batchnorm training forward normalizes with the micro-batch statistics") {
  vk::Device& dev = device();
  for (const Shape& s : kShapes) {
    const auto x = test::random_vector(s.size(), s.HW, 1.0f, 3.0f);
    const auto w = test::random_vector(s.C, 1, 0.5f, 1.5f), b = test::random_vector(s.C, 2);
    vk::Buffer bx = test::to_device(dev, x, "x"), bw = test::to_device(dev, w, "weight"),
               bb = test::to_device(dev, b, "bias"), by = test::zeros(dev, s.size(), "y"),
               bmean = test::zeros(dev, s.C, "mean"), brstd = test::zeros(dev, s.C, "rstd"),
               stats = stats_buffer(dev, s.C);
    vk::Commands cmd(dev, "batchnorm");
    ops::batchnorm_forward_train(cmd, bx, bw, bb, by, bmean, brstd, stats, s.N, s.C, s.HW, true);
    cmd.run();
    const auto xd = test::to_double(x), wd = test::to_double(w), bd = test::to_double(b);
    std::vector<double> y(s.size()), mean(s.C), rstd(s.C);
    ref::batchnorm_forward_train(xd.data(), wd.data(), bd.data(), y.data(), mean.data(),
                                 rstd.data(), s.N, s.C, s.HW);
    test::check_close(test::to_host(by), test::to_float(y), 1e-5, 1e-5, "y " + name(s));
    test::check_close(test::to_host(bmean), test::to_float(mean), 1e-6, 1e-6, "mean " + name(s));
    test::check_close(test::to_host(brstd), test::to_float(rstd), 0.0, 1e-5, "rstd " + name(s));
  }
}

TEST_CASE_FIXTURE(test::Gpu, "batchnorm backward writes dx and adds the parameter gradients through the micro-batch statistics") {
  vk::Device& dev = device();
  for (const Shape& s : kShapes) {
    const auto x = test::random_vector(s.size(), s.HW, 1.0f, 3.0f);
    const auto w = test::random_vector(s.C, 1, 0.5f, 1.5f), dy = test::random_vector(s.size(), 3),
               dx0 = test::random_vector(s.size(), 4), dw0 = test::random_vector(s.C, 5),
               db0 = test::random_vector(s.C, 6);
    const auto xd = test::to_double(x), wd = test::to_double(w), dyd = test::to_double(dy);
    std::vector<double> y(s.size()), mean(s.C), rstd(s.C), zero(s.C, 0.0);
    ref::batchnorm_forward_train(xd.data(), wd.data(), zero.data(), y.data(), mean.data(),
                                 rstd.data(), s.N, s.C, s.HW);
    vk::Buffer bx = test::to_device(dev, x, "x"), bw = test::to_device(dev, w, "weight"),
               bmean = test::to_device(dev, test::to_float(mean), "mean"),
               brstd = test::to_device(dev, test::to_float(rstd), "rstd"),
               bdy = test::to_device(dev, dy, "dy"), bdx = test::to_device(dev, dx0, "dx"),
               bdw = test::to_device(dev, dw0, "dweight"), bdb = test::to_device(dev, db0, "dbias");
    vk::Commands cmd(dev, "batchnorm backward");
    ops::batchnorm_backward(cmd, bdy, bx, bw, bmean, brstd, bdx, bdw, bdb, s.N, s.C, s.HW);
    cmd.run();
    auto dx = test::to_double(dx0), dw = test::to_double(dw0), db = test::to_double(db0);
    ref::batchnorm_backward(dyd.data(), xd.data(), wd.data(), mean.data(), rstd.data(), dx.data(),
                            dw.data(), db.data(), s.N, s.C, s.HW);
    test::check_close(test::to_host(bdx), test::to_float(dx), 1e-5, 1e-5, "dx " + name(s));
    test::check_close(test::to_host(bdw), test::to_float(dw), 1e-5, 1e-5, "dweight " + name(s));
    test::check_close(test::to_host(bdb), test::to_float(db), 1e-5, 1e-5, "dbias " + name(s));
  }
}

TEST_CASE("batchnorm reference backward agrees with finite differences") {
  const Shape s{3, 2, 5};
  const auto x = test::to_double(test::random_vector(s.size(), 1, -2.0f, 2.0f));
  const auto w = test::to_double(test::random_vector(s.C, 2, 0.5f, 1.5f));
  const auto b = test::to_double(test::random_vector(s.C, 3));
  const auto r = test::to_double(test::random_vector(s.size(), 4));
  auto loss = [&](const std::vector<double>& xv, const std::vector<double>& wv,
                  const std::vector<double>& bv) {
    std::vector<double> y(s.size()), mean(s.C), rstd(s.C);
    ref::batchnorm_forward_train(xv.data(), wv.data(), bv.data(), y.data(), mean.data(),
                                 rstd.data(), s.N, s.C, s.HW);
    return test::dot(y, r);
  };
  std::vector<double> y(s.size()), mean(s.C), rstd(s.C), dx(s.size(), 0.0), dw(s.C, 0.0),
      db(s.C, 0.0);
  ref::batchnorm_forward_train(x.data(), w.data(), b.data(), y.data(), mean.data(), rstd.data(),
                               s.N, s.C, s.HW);
  ref::batchnorm_backward(r.data(), x.data(), w.data(), mean.data(), rstd.data(), dx.data(),
                          dw.data(), db.data(), s.N, s.C, s.HW);
  test::check_gradient([&](const std::vector<double>& v) { return loss(v, w, b); }, x, dx, 1e-5,
                       1e-6, "batchnorm dx");
  test::check_gradient([&](const std::vector<double>& v) { return loss(x, v, b); }, w, dw, 1e-5,
                       1e-6, "batchnorm dweight");
  test::check_gradient([&](const std::vector<double>& v) { return loss(x, w, v); }, b, db, 1e-5,
                       1e-6, "batchnorm dbias");
}

namespace {

// One mini-batch of M micro-batches through the GPU: a training forward per micro-batch
// (each also `recomputed` extra times with accumulate off, as re-materialization does),
// then the once-per-mini-batch running-statistics update.
void train_mini_batch(vk::Device& dev, const std::vector<float>& x, const Shape& micro, uint32_t M,
                      vk::Buffer& stats, vk::Buffer& running_mean, vk::Buffer& running_var,
                      int recomputed) {
  const std::vector<float> ones(micro.C, 1.0f), zeros(micro.C, 0.0f);
  vk::Buffer bw = test::to_device(dev, ones, "weight"), bb = test::to_device(dev, zeros, "bias"),
             by = test::zeros(dev, micro.size(), "y"), bmean = test::zeros(dev, micro.C, "mean"),
             brstd = test::zeros(dev, micro.C, "rstd");
  std::vector<vk::Buffer> xs;
  for (uint32_t m = 0; m < M; ++m)
    xs.push_back(test::to_device(
        dev, std::vector<float>(x.begin() + m * micro.size(), x.begin() + (m + 1) * micro.size()),
        "x" + std::to_string(m)));
  vk::Commands cmd(dev, "mini-batch");
  for (uint32_t m = 0; m < M; ++m) {
    ops::batchnorm_forward_train(cmd, xs[m], bw, bb, by, bmean, brstd, stats, micro.N, micro.C,
                                 micro.HW, true);
    for (int r = 0; r < recomputed; ++r)
      ops::batchnorm_forward_train(cmd, xs[m], bw, bb, by, bmean, brstd, stats, micro.N,
                                   micro.C, micro.HW, false);
  }
  ops::batchnorm_update_running(cmd, stats, running_mean, running_var, micro.C);
  cmd.run();
}

// A mini-batch whose micro-batches have different means (so merging them must account for
// the spread between micro-batches) far from 0 relative to their spread.
std::vector<float> mini_batch(const Shape& micro, uint32_t M, uint32_t seed) {
  auto x = test::random_vector(micro.size() * M, seed, -1.0f, 1.0f);
  for (uint32_t m = 0; m < M; ++m)
    for (size_t i = 0; i < micro.size(); ++i) x[m * micro.size() + i] += 5.0f + 0.5f * float(m);
  return x;
}

void check_running(vk::Device& dev, int recomputed) {
  const Shape micro{3, 5, 10};
  const uint32_t M = 4;
  const Shape whole{micro.N * M, micro.C, micro.HW};
  auto mean = test::to_double(test::random_vector(micro.C, 1));
  auto var = test::to_double(test::random_vector(micro.C, 2, 0.5f, 2.0f));
  vk::Buffer stats = stats_buffer(dev, micro.C),
             running_mean = test::to_device(dev, test::to_float(mean), "running_mean"),
             running_var = test::to_device(dev, test::to_float(var), "running_var");
  // Two mini-batches: the update must also clear the accumulator for the next one.
  for (uint32_t step = 0; step < 2; ++step) {
    const auto x = mini_batch(micro, M, 10 + step);
    train_mini_batch(dev, x, micro, M, stats, running_mean, running_var, recomputed);
    const auto xd = test::to_double(x);
    ref::batchnorm_update_running(xd.data(), mean.data(), var.data(), whole.N, whole.C, whole.HW);
    const std::string what = " after mini-batch " + std::to_string(step);
    test::check_close(test::to_host(running_mean), test::to_float(mean), 1e-6, 1e-6,
                      "running_mean" + what);
    test::check_close(test::to_host(running_var), test::to_float(var), 1e-6, 1e-5,
                      "running_var" + what);
  }
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "batchnorm running statistics after four micro-batches equal PyTorch's update on the whole mini-batch") {
  check_running(device(), 0);
}

TEST_CASE_FIXTURE(test::Gpu, "batchnorm forwards recomputed for re-materialization leave the running statistics alone") {
  check_running(device(), 2);
}

TEST_CASE_FIXTURE(test::Gpu, "batchnorm evaluation forward normalizes with the running statistics") {
  vk::Device& dev = device();
  for (const Shape& s : kShapes) {
    const auto x = test::random_vector(s.size(), s.HW, -3.0f, 3.0f);
    const auto w = test::random_vector(s.C, 1, 0.5f, 1.5f), b = test::random_vector(s.C, 2),
               rm = test::random_vector(s.C, 3), rv = test::random_vector(s.C, 4, 0.1f, 2.0f);
    vk::Buffer bx = test::to_device(dev, x, "x"), bw = test::to_device(dev, w, "weight"),
               bb = test::to_device(dev, b, "bias"), brm = test::to_device(dev, rm, "running_mean"),
               brv = test::to_device(dev, rv, "running_var"), by = test::zeros(dev, s.size(), "y");
    vk::Commands cmd(dev, "batchnorm eval");
    ops::batchnorm_forward_eval(cmd, bx, bw, bb, brm, brv, by, s.N, s.C, s.HW);
    cmd.run();
    const auto xd = test::to_double(x), wd = test::to_double(w), bd = test::to_double(b),
               rmd = test::to_double(rm), rvd = test::to_double(rv);
    std::vector<double> y(s.size());
    ref::batchnorm_forward_eval(xd.data(), wd.data(), bd.data(), rmd.data(), rvd.data(), y.data(),
                                s.N, s.C, s.HW);
    test::check_close(test::to_host(by), test::to_float(y), 1e-5, 1e-5, "eval y " + name(s));
  }
}

namespace {

// A tensor's values as a format stores them: packed two to a word, or fp32 as they are.
std::vector<float> stored(const std::vector<float>& v, Precision p) { return ops::is_half(p) ? packed(v, p) : v; }

// The kernels on x and y stored as `f` says against the fp32 kernels on the same values, the
// results packed and rounded on the host: the statistics, the accumulator (after two
// forwards: the second merges into what the first left) and the parameter gradients to the
// bit, y as stored, dx written over what it held and rounded to x's precision, or not.
void check_formats(vk::Device& dev, const Shape& s, ops::Formats f, uint32_t seed) {
  const std::string what = std::string("x ") + ops::precision_name(f.x) + ", y " + ops::precision_name(f.y) + " " + name(s);
  const size_t n = s.size();
  const auto x = rounded(test::random_vector(n, seed, 1.0f, 3.0f), f.x);
  const auto w = test::random_vector(s.C, seed + 1, 0.5f, 1.5f), b = test::random_vector(s.C, seed + 2);
  const auto rm = test::random_vector(s.C, seed + 3), rv = test::random_vector(s.C, seed + 4, 0.1f, 2.0f);
  const auto dy = test::random_vector(n, seed + 5), dx0 = test::random_vector(n, seed + 6);
  const size_t y_words = stored(std::vector<float>(n), f.y).size();
  auto bx = test::to_device(dev, x, "x"), hx = test::to_device(dev, stored(x, f.x), "x as stored");
  auto bw = test::to_device(dev, w, "weight"), bb = test::to_device(dev, b, "bias");
  auto brm = test::to_device(dev, rm, "running_mean"), brv = test::to_device(dev, rv, "running_var");
  auto bdy = test::to_device(dev, dy, "dy");
  auto y = test::zeros(dev, n, "y"), hy = test::zeros(dev, y_words, "y as stored");
  auto ey = test::zeros(dev, n, "eval y"), hey = test::zeros(dev, y_words, "eval y as stored");
  auto mean = test::zeros(dev, s.C, "mean"), rstd = test::zeros(dev, s.C, "rstd");
  auto hmean = test::zeros(dev, s.C, "mean from x as stored"), hrstd = test::zeros(dev, s.C, "rstd from x as stored");
  auto stats = stats_buffer(dev, s.C), hstats = stats_buffer(dev, s.C);
  auto dx = test::to_device(dev, dx0, "dx"), rdx = test::to_device(dev, dx0, "dx, rounded");
  auto wdx = test::to_device(dev, dx0, "dx from x as stored, fp32");
  auto dw = test::zeros(dev, s.C, "dweight"), db = test::zeros(dev, s.C, "dbias");
  auto hdw = test::zeros(dev, s.C, "dweight from x as stored"), hdb = test::zeros(dev, s.C, "dbias from x as stored");
  auto wdw = test::zeros(dev, s.C, "dweight beside an fp32 dx"), wdb = test::zeros(dev, s.C, "dbias beside an fp32 dx");
  vk::Commands cmd(dev, "batchnorm 16 bits");
  for (int twice = 0; twice < 2; ++twice) {
    ops::batchnorm_forward_train(cmd, bx, bw, bb, y, mean, rstd, stats, s.N, s.C, s.HW, true);
    ops::batchnorm_forward_train(cmd, hx, bw, bb, hy, hmean, hrstd, hstats, s.N, s.C, s.HW, true, 1e-5f, f);
  }
  ops::batchnorm_forward_eval(cmd, bx, bw, bb, brm, brv, ey, s.N, s.C, s.HW);
  ops::batchnorm_forward_eval(cmd, hx, bw, bb, brm, brv, hey, s.N, s.C, s.HW, 1e-5f, f);
  ops::batchnorm_backward(cmd, bdy, bx, bw, mean, rstd, dx, dw, db, s.N, s.C, s.HW);
  ops::batchnorm_backward(cmd, bdy, hx, bw, mean, rstd, rdx, hdw, hdb, s.N, s.C, s.HW, f.x, f.x);
  ops::batchnorm_backward(cmd, bdy, hx, bw, mean, rstd, wdx, wdw, wdb, s.N, s.C, s.HW, f.x);
  cmd.run();
  check_bits(test::to_host(hy), stored(test::to_host(y), f.y), what + ": y");
  check_bits(test::to_host(hey), stored(test::to_host(ey), f.y), what + ": evaluation y");
  check_bits(test::to_host(hmean), test::to_host(mean), what + ": mean");
  check_bits(test::to_host(hrstd), test::to_host(rstd), what + ": rstd");
  check_bits(test::to_host(hstats), test::to_host(stats), what + ": statistics accumulator");
  check_bits(test::to_host(rdx), rounded(test::to_host(dx), f.x), what + ": dx rounded");
  check_bits(test::to_host(wdx), test::to_host(dx), what + ": dx in fp32");
  for (const auto* g : {&hdw, &wdw}) check_bits(test::to_host(*g), test::to_host(dw), what + ": dweight");
  for (const auto* g : {&hdb, &wdb}) check_bits(test::to_host(*g), test::to_host(db), what + ": dbias");
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "batchnorm reads and writes 16 bits as the fp32 kernels on the values") {
  // y a word (two neighbours of a plane) at a time where H * W is even: channels of 18 values
  // (a lane's pair left over), 14x14 planes, two values; x alone in 16 bits where it is odd.
  const Shape shapes[] = {{3, 4, 6}, {4, 5, 196}, {1, 3, 2}, {2, 3, 25}, {3, 2, 1}};
  uint32_t seed = 40;
  for (Precision p : {Precision::Bf16, Precision::Fp16}) {
    for (const Shape& s : shapes) check_formats(device(), s, {p, s.HW % 2 == 0 ? p : Precision::Fp32}, seed += 9);
    // The first layer of a stage reading the boundary of an fp32 stage or of one in the other type.
    const Precision other = p == Precision::Bf16 ? Precision::Fp16 : Precision::Bf16;
    for (Precision x : {Precision::Fp32, other}) check_formats(device(), shapes[0], {x, p}, seed += 9);
  }
  // A word of a 16-bit y would hold two channels' values: refused.
  vk::Device& dev = device();
  auto t = test::zeros(dev, 64, "t"), c = test::zeros(dev, 8, "c"), st = stats_buffer(dev, 2);
  vk::Commands cmd(dev, "refusal");
  const ops::Formats half{Precision::Bf16, Precision::Bf16};
  CHECK_THROWS_WITH_AS(ops::batchnorm_forward_train(cmd, t, c, c, t, c, c, st, 3, 2, 5, true, 1e-5f, half),
                       doctest::Contains("H * W even"), InternalError);
  CHECK_THROWS_WITH_AS(ops::batchnorm_forward_eval(cmd, t, c, c, c, c, t, 3, 2, 5, 1e-5f, half),
                       doctest::Contains("H * W even"), InternalError);
}

TEST_CASE_FIXTURE(test::Gpu, "batchnorm training refuses a micro-batch with one value per channel") {
  vk::Device& dev = device();
  vk::Buffer x = test::zeros(dev, 3, "x"), p = test::zeros(dev, 3, "param"),
             stats = stats_buffer(dev, 3);
  vk::Commands cmd(dev, "batchnorm");
  CHECK_THROWS_WITH_AS(
      ops::batchnorm_forward_train(cmd, x, p, p, x, p, p, stats, 1, 3, 1, true),
      doctest::Contains("more than 1 value per channel"), UserError);
}

}  // namespace kernels_batchnorm_test
