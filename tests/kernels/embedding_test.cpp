#include <doctest/doctest.h>

#include <climits>
#include <sstream>
#include <string>
#include <vector>

#include "check.h"
#include "gpu.h"
#include "ops/embedding.h"
#include "ref/embedding.h"
#include "vk/commands.h"

namespace kernels_embedding_test {

using namespace brigade;

namespace {

struct Dims {
  uint32_t B, T, C, V, block_size;
};

std::string describe(const Dims& d) {
  std::ostringstream o;
  o << "B" << d.B << " T" << d.T << " C" << d.C << " V" << d.V << " block " << d.block_size;
  return o.str();
}

// Odd sizes, channel counts that are not multiples of the workgroup, a vocabulary smaller
// than the sequence (many repeated tokens), the gpt-mini layer at batch 2, and three tokens
// over 400 positions (the token lists' workgroup takes chunks of four, each holding repeats).
const std::vector<Dims> kDims = {
    {2, 5, 7, 11, 5}, {3, 17, 33, 5, 20}, {1, 1, 1, 1, 1}, {2, 9, 70, 300, 16}, {2, 128, 128, 256, 128},
    {4, 100, 8, 3, 100},
};

std::vector<int32_t> random_tokens(size_t n, uint32_t V, uint32_t seed) {
  const auto u = test::random_vector(n, seed, 0.0f, float(V));
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = std::min<int32_t>(int32_t(u[i]), int32_t(V) - 1);
  return t;
}

struct Problem {
  Dims d;
  std::vector<int32_t> tokens;
  std::vector<float> wte, wpe, dout;
  Problem(const Dims& dims, uint32_t seed)
      : d(dims),
        tokens(random_tokens(size_t(d.B) * d.T, d.V, seed)),
        wte(test::random_vector(size_t(d.V) * d.C, seed + 1)),
        wpe(test::random_vector(size_t(d.block_size) * d.C, seed + 2)),
        dout(test::random_vector(size_t(d.B) * d.T * d.C, seed + 3)) {}
};

std::vector<float> gpu_forward(vk::Device& dev, const Problem& p) {
  auto tok = test::to_device(dev, p.tokens, "tokens"), wte = test::to_device(dev, p.wte, "wte");
  auto wpe = test::to_device(dev, p.wpe, "wpe");
  auto out = test::zeros(dev, size_t(p.d.B) * p.d.T * p.d.C, "out");
  vk::Commands cmd(dev, "embedding forward");
  ops::embedding_forward(cmd, tok, wte, wpe, out, p.d.B, p.d.T, p.d.C, p.d.V);
  cmd.run();
  return test::to_host(out);
}

std::vector<float> cpu_forward(const Problem& p) {
  std::vector<float> out(size_t(p.d.B) * p.d.T * p.d.C);
  ref::embedding_forward<float>(p.tokens, p.wte, p.wpe, out, p.d.B, p.d.T, p.d.C, p.d.V);
  return out;
}

struct Grads {
  std::vector<float> dwte, dwpe;
};

Grads start_grads(const Dims& d, uint32_t seed) {
  return {test::random_vector(size_t(d.V) * d.C, seed, 1.0f, 2.0f),
          test::random_vector(size_t(d.block_size) * d.C, seed + 1, 1.0f, 2.0f)};
}

Grads gpu_backward(vk::Device& dev, const Problem& p, const Grads& start, ops::TokenPass pass = ops::TokenPass::Auto,
                   uint32_t rows = 0) {
  auto dout = test::to_device(dev, p.dout, "dout"), tok = test::to_device(dev, p.tokens, "tokens");
  auto dwte = test::to_device(dev, start.dwte, "dwte", vk::Category::Gradients);
  auto dwpe = test::to_device(dev, start.dwpe, "dwpe", vk::Category::Gradients);
  auto scratch = test::zeros(dev, ops::embedding_scratch_floats(p.d.B, p.d.T, p.d.V), "token lists", vk::Category::Scratch);
  vk::Commands cmd(dev, "embedding backward");
  ops::embedding_backward(cmd, dout, tok, dwte, dwpe, p.d.B, p.d.T, p.d.C, p.d.V, vk::View(scratch), pass, rows);
  cmd.run();
  return {test::to_host(dwte), test::to_host(dwpe)};
}

Grads cpu_backward(const Problem& p, Grads g) {
  auto dwte = test::to_double(g.dwte), dwpe = test::to_double(g.dwpe);
  const auto dout = test::to_double(p.dout);
  ref::embedding_backward<double>(dout, p.tokens, dwte, dwpe, p.d.B, p.d.T, p.d.C, p.d.V);
  return {test::to_float(dwte), test::to_float(dwpe)};
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "embedding forward adds the token row and the position row") {
  uint32_t seed = 1;
  for (const auto& d : kDims) {
    const Problem p(d, seed += 10);
    // One float addition per element on both sides: exactly equal.
    test::check_close(gpu_forward(device(), p), cpu_forward(p), 0, 0, "embedding forward " + describe(d));
  }
}

TEST_CASE_FIXTURE(test::Gpu, "embedding backward adds token and position gradients to what they held") {
  uint32_t seed = 100;
  for (const auto& d : kDims) {
    const Problem p(d, seed += 10);
    const auto start = start_grads(d, seed + 5);
    const auto gpu = gpu_backward(device(), p, start), cpu = cpu_backward(p, start);
    // Sums of up to B * T values in [-1, 1] in fp32 against a double reference.
    test::check_close(gpu.dwte, cpu.dwte, 1e-5, 1e-5, "dwte " + describe(d));
    test::check_close(gpu.dwpe, cpu.dwpe, 1e-5, 1e-5, "dwpe " + describe(d));
  }
}

TEST_CASE_FIXTURE(test::Gpu, "embedding backward is bit-identical from run to run") {
  const Problem p(kDims[4], 300);
  const auto start = start_grads(p.d, 301);
  const auto a = gpu_backward(device(), p, start), b = gpu_backward(device(), p, start);
  CHECK(a.dwte == b.dwte);
  CHECK(a.dwpe == b.dwpe);
}

// Each vocabulary row sums its positions in order whatever rows an invocation of the scan owns
// (a CPU's whole vocabulary, one row, what lies between) and from its list of positions (a
// GPU's way): the same bits.
TEST_CASE_FIXTURE(test::Gpu, "embedding backward gives the same bits with any vocabulary rows an invocation and from lists") {
  uint32_t seed = 400;
  for (const auto& d : kDims) {
    const Problem p(d, seed += 10);
    const auto start = start_grads(d, seed + 5);
    const Grads one = gpu_backward(device(), p, start, ops::TokenPass::Scan, 1);
    for (uint32_t rows : {3u, 32u, 256u}) {
      const Grads g = gpu_backward(device(), p, start, ops::TokenPass::Scan, rows);
      CHECK_MESSAGE(g.dwte == one.dwte, describe(d), ", ", rows, " rows against one");
      CHECK(g.dwpe == one.dwpe);
    }
    const Grads lists = gpu_backward(device(), p, start, ops::TokenPass::Lists);
    CHECK_MESSAGE(lists.dwte == one.dwte, describe(d), ", lists against one row");
    CHECK(lists.dwpe == one.dwpe);
    test::check_close(one.dwte, cpu_backward(p, start).dwte, 1e-5, 1e-5, "dwte, one row, " + describe(d));
  }
}

// Past one dispatch's 65535 workgroups, where the launchers cap the grid and the kernels walk
// the rest: T * C over 65535 x 64 (a GPT of block size 4096 and width 1025, at any
// micro-batch), and a vocabulary of more than 65535 rows one row an invocation (a GPU's scan).
TEST_CASE_FIXTURE(test::Gpu, "embedding backward sums position gradients of more than 65535 workgroups") {
  const Problem p({1, 4096, 1025, 3, 4096}, 500);
  const auto start = start_grads(p.d, 505);
  const auto gpu = gpu_backward(device(), p, start), cpu = cpu_backward(p, start);
  test::check_close(gpu.dwpe, cpu.dwpe, 1e-5, 1e-5, "dwpe " + describe(p.d));
  // Each of the 3 rows sums about 1365 positions in fp32.
  test::check_close(gpu.dwte, cpu.dwte, 1e-4, 1e-5, "dwte " + describe(p.d));
}

TEST_CASE_FIXTURE(test::Gpu, "embedding backward scans a vocabulary of more than 65535 rows one row an invocation") {
  const Problem p({2, 7, 3, 65537, 7}, 510);
  const auto start = start_grads(p.d, 515);
  Problem edges = p;
  edges.tokens[0] = 65536, edges.tokens[1] = 65535, edges.tokens[2] = 0;  // the last rows and the first
  const auto cpu = cpu_backward(edges, start);
  const auto one = gpu_backward(device(), edges, start, ops::TokenPass::Scan, 1);
  test::check_close(one.dwte, cpu.dwte, 1e-5, 1e-5, "dwte, one row an invocation, " + describe(p.d));
  test::check_close(one.dwpe, cpu.dwpe, 1e-5, 1e-5, "dwpe, " + describe(p.d));
  CHECK(gpu_backward(device(), edges, start).dwte == one.dwte);
}

TEST_CASE_FIXTURE(test::Gpu, "embedding clamps out-of-range tokens and touches nothing outside its tables") {
  vk::Device& dev = device();
  // C = 64 floats is 256 bytes, a multiple of every device's storage-buffer offset alignment,
  // so the tables can sit between guard rows of one buffer.
  const uint32_t B = 1, T = 6, C = 64, V = 3;
  Problem p({B, T, C, V, T}, 400);
  p.tokens = {-1, 3, 1, INT_MAX, INT_MIN, 2000};
  const auto y = gpu_forward(dev, p);
  for (uint32_t t = 0; t < T; ++t) {
    const uint32_t row = (t == 2) ? 1 : (p.tokens[t] < 0 ? 0 : V - 1);
    CHECK_MESSAGE(y[t * C + 5] == p.wte[row * C + 5] + p.wpe[t * C + 5], "position ", t);
  }

  std::vector<float> want_rows(V * C, 7.0f), unused(T * C);
  std::vector<double> rows_d = test::to_double(want_rows), unused_d = test::to_double(unused);
  ref::embedding_backward<double>(test::to_double(p.dout), p.tokens, rows_d, unused_d, B, T, C, V);
  for (ops::TokenPass pass : {ops::TokenPass::Scan, ops::TokenPass::Lists}) {
    const std::string what = pass == ops::TokenPass::Scan ? "scan" : "lists";
    std::vector<float> guarded((V + 2) * C, 7.0f);
    auto table = test::to_device(dev, guarded, "dwte with guard rows", vk::Category::Gradients);
    auto dwpe = test::zeros(dev, T * C, "dwpe", vk::Category::Gradients);
    auto dout = test::to_device(dev, p.dout, "dout"), tok = test::to_device(dev, p.tokens, "tokens");
    auto lists = test::zeros(dev, ops::embedding_scratch_floats(B, T, V), "token lists", vk::Category::Scratch);
    vk::Commands cmd(dev, "embedding backward, guarded");
    ops::embedding_backward(cmd, dout, tok, vk::View(table, C * 4, V * C * 4), dwpe, B, T, C, V, vk::View(lists), pass);
    cmd.run();
    const auto got = test::to_host(table);
    for (uint32_t c = 0; c < C; ++c) {
      CHECK_MESSAGE(got[c] == 7.0f, what);
      CHECK_MESSAGE(got[(V + 1) * C + c] == 7.0f, what);
    }
    test::check_close(std::span<const float>(got).subspan(C, V * C), test::to_float(rows_d), 1e-6,
                      1e-6, "dwte with clamped tokens, " + what);
  }
}

TEST_CASE("embedding CPU backward matches finite differences of the forward") {
  const uint32_t B = 2, T = 4, C = 3, V = 5, block = 6;
  const std::vector<int32_t> tokens = {0, 4, 4, 2, 4, 0, 1, 4};  // repeats within and across rows
  auto wte = test::to_double(test::random_vector(V * C, 1));
  auto wpe = test::to_double(test::random_vector(block * C, 2));
  const auto r = test::to_double(test::random_vector(B * T * C, 3));  // loss = sum(out * r)
  auto loss = [&](const std::vector<double>& te, const std::vector<double>& pe) {
    std::vector<double> out(B * T * C);
    ref::embedding_forward<double>(tokens, te, pe, out, B, T, C, V);
    double l = 0;
    for (size_t i = 0; i < out.size(); ++i) l += out[i] * r[i];
    return l;
  };
  std::vector<double> dwte(wte.size()), dwpe(wpe.size());
  ref::embedding_backward<double>(r, tokens, dwte, dwpe, B, T, C, V);
  test::check_gradient([&](const auto& v) { return loss(v, wpe); }, wte, dwte, 1e-4, 1e-8, "dwte");
  test::check_gradient([&](const auto& v) { return loss(wte, v); }, wpe, dwpe, 1e-4, 1e-8, "dwpe");
}

TEST_CASE_FIXTURE(test::Gpu, "embedding refuses sequences longer than the position table") {
  vk::Device& dev = device();
  auto tok = test::zeros(dev, 8, "tokens"), wte = test::zeros(dev, 4 * 2, "wte");
  auto wpe = test::zeros(dev, 3 * 2, "wpe"), out = test::zeros(dev, 8 * 2, "out");
  vk::Commands cmd(dev, "too long");
  CHECK_THROWS_WITH_AS(ops::embedding_forward(cmd, tok, wte, wpe, out, 2, 4, 2, 4),
                       doctest::Contains("need 4 position embeddings"), UserError);
}

}  // namespace kernels_embedding_test
