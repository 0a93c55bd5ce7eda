// Specialization constants folded on the host (vk/specialize.h), which SwiftShader's fp32
// products take: the same bits as the driver's own specialization, on the test's device. In
// the optimized build only: the sanitized one has no SPIR-V optimizer (CMakeLists.txt).
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "gpu.h"
#include "ops/matmul.h"
#include "shaders/matmul.h"
#include "vk/buffer.h"
#include "vk/commands.h"
#include "vk/kernel.h"
#include "vk/specialize.h"
#include "vk/spirv.h"

namespace kernels_specialize_test {

using namespace brigade;

namespace {

// What C holds before a product, `n` values.
std::vector<float> initial_c(size_t n) {
  std::vector<float> c(n);
  for (size_t i = 0; i < c.size(); ++i) c[i] = float(int(i % 7) - 3);
  return c;
}

// C = op(A) op(B) (+ bias) on `dev` with the register kernel's blocks of tm x tn, C's bits.
std::vector<uint32_t> product(vk::Device& dev, ops::MatmulParams p, uint32_t tm, uint32_t tn, bool bias) {
  const uint32_t M = p.M, N = p.N, K = p.K;
  std::vector<float> a(size_t(M) * K), b(size_t(K) * N), c = initial_c(size_t(M) * N), v(N);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(int(i * 37 % 101) - 50) / 16.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(int(i * 53 % 89) - 44) / 32.0f;
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) / 8.0f;
  vk::Buffer ba(dev, a.size() * 4, vk::Category::Activations, "a"), bb(dev, b.size() * 4, vk::Category::Activations, "b"),
      bc(dev, c.size() * 4, vk::Category::Activations, "c"), bv(dev, v.size() * 4, vk::Category::Activations, "bias");
  vk::upload(ba, a.data(), a.size() * 4);
  vk::upload(bb, b.data(), b.size() * 4);
  vk::upload(bc, c.data(), c.size() * 4);
  vk::upload(bv, v.data(), v.size() * 4);
  p.tiling = ops::MatmulTiling{ops::MatmulTiling::Variant::Registers, 8, 8, tm, tn, 16, 0};
  vk::Commands cmd(dev, "product");
  ops::matmul(cmd, ba, bb, bc, p, bias ? std::optional<vk::View>(bv) : std::nullopt);
  cmd.run();
  std::vector<uint32_t> out(c.size());
  vk::download(bc, out.data(), out.size() * 4);
  return out;
}

}  // namespace

TEST_CASE("folding a shader's specialization constants leaves no specialization constant in it") {
  vk::Specialization spec;
  spec.set(BRIGADE_MATMUL_SPEC_WG_X, 8).set(BRIGADE_MATMUL_SPEC_WG_Y, 4).set(BRIGADE_MATMUL_SPEC_TM, 8).set(BRIGADE_MATMUL_SPEC_TN, 4);
  const std::span<const uint32_t> given = vk::shader_spirv("matmul");
  const std::vector<uint32_t> folded = vk::specialize(given, spec, "matmul");
  // Opcodes of OpSpecConstantTrue, False, the constant, Composite and Op: 48 to 52.
  auto spec_constants = [](std::span<const uint32_t> words) {
    size_t n = 0;
    for (size_t i = 5; i < words.size(); i += words[i] >> 16) {
      const uint32_t op = words[i] & 0xffff;
      n += op >= 48 && op <= 52;
      if ((words[i] >> 16) == 0) break;
    }
    return n;
  };
  CHECK(spec_constants(given) > 10);
  CHECK(spec_constants(folded) == 0);
  CHECK(vk::reflect(folded, "matmul").bindings == vk::reflect(given, "matmul").bindings);
}

// Not on SwiftShader, whose products fold already: there the kernel suite's cases check them
// against the CPU reference.
TEST_CASE_FIXTURE(test::Gpu, "the matrix kernel with its constants folded on the host gives the driver's specialization's bits"
                  * doctest::test_suite("not on SwiftShader")) {
  vk::Device& plain = device();
  REQUIRE_FALSE(plain.info().specialize_on_host);
  vk::DeviceOptions options;
  options.label = "folding";
  options.specialize_on_host = true;
  options.subgroup_size = test::test_subgroup_size();
  vk::Device folding(test::instance(), test::test_device_index(), options);
  vk::Specialization spec;
  spec.set(BRIGADE_MATMUL_SPEC_TM, 8);
  spec.fold = true;
  CHECK(vk::Kernel(folding, "matmul", spec).name() == "matmul|3=8|folded");
  CHECK(vk::Kernel(plain, "matmul", spec).name() == "matmul|3=8");
  // Odd sizes (edges, K % 4) and whole quads, every transpose, a bias or accumulation: the
  // specialization constants each case sets.
  // Plain variables, not structured bindings: clang 14 cannot capture those in doctest's INFO.
  for (const std::array<uint32_t, 3>& shape : {std::array{37u, 29u, 19u}, {64u, 64u, 64u}})
    for (int t = 0; t < 4; ++t)
      for (bool accumulate : {false, true}) {
        ops::MatmulParams p;
        p.M = shape[0], p.N = shape[1], p.K = shape[2], p.trans_a = t & 1, p.trans_b = t & 2, p.accumulate = accumulate,
        p.alpha = 0.75f;
        INFO(p.M, "x", p.N, "x", p.K, " trans ", t, accumulate ? " accumulating" : "");
        const std::vector<uint32_t> want = product(plain, p, 8, 4, !accumulate), got = product(folding, p, 8, 4, !accumulate);
        // A product that wrote nothing would leave both alike.
        const std::vector<float> c0 = initial_c(want.size());
        CHECK(std::memcmp(want.data(), c0.data(), want.size() * 4) != 0);
        CHECK(std::memcmp(want.data(), got.data(), want.size() * 4) == 0);
      }
}

}  // namespace kernels_specialize_test
