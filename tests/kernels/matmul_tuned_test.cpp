// Tuned tilings (ops/tuned_tilings.h): ops::matmul takes a device's tuned tiling for the one
// product it was kept for, only while that tiling is still among the product's candidates
// (ops/matmul_candidates.h), and computes the same product under it; other products and other
// devices keep their defaults.
#include <doctest/doctest.h>

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "check.h"
#include "gpu.h"
#include "ops/matmul.h"
#include "ops/matmul_candidates.h"
#include "ops/product_capture.h"
#include "ops/tuned_tilings.h"
#include "ref/matmul.h"
#include "vk/commands.h"

namespace kernels_matmul_tuned_test {

using namespace brigade;
using ops::MatmulParams;
using ops::MatmulTiling;

namespace {

// No device keeps tuned tilings past a case, whatever it checked.
struct Untuned {
  Untuned() { ops::clear_tuned_tilings(); }
  ~Untuned() { ops::clear_tuned_tilings(); }
};

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "a product takes its device's tuned tiling, and no other product or device does") {
  const Untuned untuned;
  vk::Device& dev = device();
  const vk::PhysicalInfo& info = dev.info();
  const MatmulParams p{.M = 70, .N = 52, .K = 40, .trans_b = true};
  const auto a = test::random_vector(uint64_t(p.M) * p.K, 1), b = test::random_vector(uint64_t(p.N) * p.K, 2);
  const auto bias = test::random_vector(p.N, 3);
  auto ba = test::to_device(dev, a, "A"), bb = test::to_device(dev, b, "B"), bbias = test::to_device(dev, bias, "bias");
  auto bc = test::zeros(dev, uint64_t(p.M) * p.N, "C");
  // The product under `q` as ops::matmul recorded it, with the tiling it took, and its C,
  // held to the CPU reference.
  auto run = [&](const MatmulParams& q) {
    ops::ProductCapture capture;
    vk::Commands cmd(dev, "tuned");
    ops::matmul(cmd, ba, bb, bc, q, vk::View(bbias));
    cmd.run();
    REQUIRE(capture.products().size() == 1);
    std::vector<double> want(uint64_t(q.M) * q.N, 0.0);
    ref::matmul<double>(test::to_double(a), test::to_double(b), want, q, std::span<const double>(test::to_double(bias)));
    test::check_close(test::to_host(bc), test::to_float(want), 1e-4, 1e-5, capture.products()[0].tiling.name());
    return capture.products()[0];
  };

  const ops::CapturedProduct plain = run(p);
  const MatmulTiling by_default = ops::default_tiling(info, p, true, 0);
  CHECK(plain.tiling.name() == by_default.name());
  CHECK_FALSE(ops::any_tuned());
  const std::vector<MatmulTiling> others = ops::product_candidates(info, plain, by_default, 0);
  REQUIRE_FALSE(others.empty());
  const std::string key = ops::product_key(plain);

  for (const MatmulTiling& other : others) {
    CAPTURE(other.name());
    ops::use_tuned_tilings(info, {{key, other.name()}});
    CHECK(ops::any_tuned());
    CHECK(ops::tuned_count(info) == 1);
    CHECK(run(p).tiling.name() == other.name());
    MatmulParams halved = p;  // another product: another key
    halved.alpha = 0.5f;
    CHECK(run(halved).tiling.name() == by_default.name());
  }
  const std::string checksum = ops::tuned_checksum(info);
  CHECK(checksum.size() == 8);

  // A name the device has no candidate by (another build's, say) is passed over.
  ops::use_tuned_tilings(info, {{key, "registers 3x3 per invocation, 1x1 invocations"}});
  CHECK(run(p).tiling.name() == by_default.name());
  CHECK(ops::tuned_checksum(info) != checksum);

  // Another device's tuned tilings leave this device's products alone.
  vk::PhysicalInfo elsewhere = info;
  elsewhere.device_uuid[0] ^= 0xff;
  ops::use_tuned_tilings(info, {});
  ops::use_tuned_tilings(elsewhere, {{key, others.front().name()}});
  CHECK(ops::any_tuned());
  CHECK(ops::tuned_count(info) == 0);
  CHECK(ops::tuned_checksum(info).empty());
  CHECK(run(p).tiling.name() == by_default.name());
}

}  // namespace kernels_matmul_tuned_test
