#include <doctest/doctest.h>

#include <vector>

#include "gpu.h"
#include "vk/buffer.h"
#include "shaders/push.h"
#include "vk/commands.h"

namespace vk_dispatch_test {

using namespace brigade;
using vk::Category;

namespace {
// Runs y += alpha * x on the device and returns y.
std::vector<float> axpy(vk::Device& dev, const std::vector<float>& x, std::vector<float> y, float alpha) {
  const uint32_t n = uint32_t(x.size());
  vk::Buffer bx(dev, n * 4, Category::Activations, "x"), by(dev, n * 4, Category::Activations, "y");
  vk::upload(bx, x.data(), n * 4);
  vk::upload(by, y.data(), n * 4);
  vk::Commands cmd(dev, "axpy");
  cmd.dispatch(dev.kernel("axpy"), {bx, by}, shaders::AxpyPush{n, alpha}, {vk::groups_for(n, BRIGADE_WG_1D)});
  cmd.run();
  vk::download(by, y.data(), n * 4);
  return y;
}
}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "a kernel dispatch computes what the host computes, odd sizes included") {
  for (uint32_t n : {1u, 255u, 256u, 257u, 100003u}) {
    std::vector<float> x(n), y(n);
    for (uint32_t i = 0; i < n; ++i) x[i] = float(i % 97) * 0.5f, y[i] = float(i % 13) - 6.0f;
    const auto out = axpy(device(), x, y, -1.5f);
    size_t bad = 0;
    for (uint32_t i = 0; i < n; ++i) bad += out[i] != y[i] + -1.5f * x[i];
    CHECK_MESSAGE(bad == 0, "n=", n, ": ", bad, " wrong elements");
  }
}

TEST_CASE_FIXTURE(test::Gpu, "dependent dispatches get a barrier, independent ones do not") {
  vk::Device& dev = device();
  const uint32_t n = 4096;
  std::vector<float> ones(n, 1.0f);
  vk::Buffer x(dev, n * 4, Category::Activations, "x"), a(dev, n * 4, Category::Activations, "a"),
      b(dev, n * 4, Category::Activations, "b");
  vk::upload(x, ones.data(), n * 4);
  vk::Commands cmd(dev, "chain");
  cmd.fill(a, 0);
  cmd.fill(b, 0);
  const vk::Kernel& k = dev.kernel("axpy");
  const vk::Groups g{vk::groups_for(n, BRIGADE_WG_1D)};
  cmd.dispatch(k, {x, a}, shaders::AxpyPush{n, 2.0f}, g);  // after fill(a): barrier
  cmd.dispatch(k, {x, b}, shaders::AxpyPush{n, 3.0f}, g);  // independent of a, b was filled before
  cmd.dispatch(k, {a, b}, shaders::AxpyPush{n, 1.0f}, g);  // reads a, writes b: barrier
  cmd.run();
  CHECK(cmd.barriers() == 2);
  std::vector<float> out(n);
  vk::download(b, out.data(), n * 4);
  CHECK(out[0] == 5.0f);
  CHECK(out[n - 1] == 5.0f);
}

TEST_CASE_FIXTURE(test::Gpu, "a recording can be reset and submitted again") {
  vk::Device& dev = device();
  const uint32_t n = 1000;
  std::vector<float> ones(n, 1.0f), zeros(n, 0.0f);
  vk::Buffer x(dev, n * 4, Category::Activations, "x"), y(dev, n * 4, Category::Activations, "y");
  vk::upload(x, ones.data(), n * 4);
  vk::upload(y, zeros.data(), n * 4);
  vk::Commands cmd(dev, "repeat");
  for (int i = 0; i < 3; ++i) {
    cmd.dispatch(dev.kernel("axpy"), {x, y}, shaders::AxpyPush{n, 1.0f}, {vk::groups_for(n, BRIGADE_WG_1D)});
    cmd.run();
    cmd.reset();
  }
  std::vector<float> out(n);
  vk::download(y, out.data(), n * 4);
  CHECK(out[n / 2] == 3.0f);
}

TEST_CASE_FIXTURE(test::Gpu, "GPU timestamps bracket a dispatch in order") {
  vk::Device& dev = device();
  const uint32_t n = 1 << 20;
  vk::Buffer x(dev, n * 4, Category::Activations, "x"), y(dev, n * 4, Category::Activations, "y");
  vk::Commands cmd(dev, "timed");
  cmd.fill(x, 0);
  cmd.fill(y, 0);
  const uint32_t t0 = cmd.timestamp();
  cmd.dispatch(dev.kernel("axpy"), {x, y}, shaders::AxpyPush{n, 1.0f}, {vk::groups_for(n, BRIGADE_WG_1D)});
  const uint32_t t1 = cmd.timestamp();
  cmd.run();
  const auto ts = cmd.timestamps_ns();
  REQUIRE(ts.size() == 2);
  CHECK(t0 == 0);
  CHECK(t1 == 1);
  CHECK(ts[1] > ts[0]);
}

// A recording resets only the queries it writes, in runs as it goes (2, 2, 4, 8, ...): every
// timestamp of a recording reused with more of them than the one before must still land on a
// reset query, which the validation layer checks on submit.
TEST_CASE_FIXTURE(test::Gpu, "timestamps in any number, in a recording reused, each on a query reset first") {
  vk::Device& dev = device();
  const uint32_t n = 1 << 12;
  vk::Buffer x(dev, n * 4, Category::Activations, "x"), y(dev, n * 4, Category::Activations, "y");
  vk::Commands cmd(dev, "timed again");
  for (uint32_t count : {1u, 2u, 3u, 37u, 5u, 64u, 65u}) {
    cmd.reset();
    for (uint32_t i = 0; i < count; ++i) {
      CHECK(cmd.timestamp() == i);
      cmd.dispatch(dev.kernel("axpy"), {x, y}, shaders::AxpyPush{n, 1.0f}, {vk::groups_for(n, BRIGADE_WG_1D)});
    }
    cmd.run();
    const auto ts = cmd.timestamps_ns();
    REQUIRE(ts.size() == count);
    for (uint32_t i = 1; i < count; ++i) CHECK_MESSAGE(ts[i] >= ts[i - 1], "timestamp ", i, " of ", count);
  }
}

TEST_CASE_FIXTURE(test::Gpu, "binding the wrong number of buffers is caught before the driver sees it") {
  vk::Device& dev = device();
  vk::Buffer x(dev, 1024, Category::Scratch, "x");
  vk::Commands cmd(dev, "wrong");
  CHECK_THROWS_WITH_AS(cmd.dispatch(dev.kernel("axpy"), {x}, shaders::AxpyPush{256, 1.0f}, {1}),
                       doctest::Contains("bound 1 buffers, the shader declares 2"), vk::VulkanError);
}

TEST_CASE_FIXTURE(test::Gpu, "a barrier taken for one binding keeps the other bindings' accesses") {
  // axpy reads x (binding 0) and writes y (binding 1). Filling y first makes the dispatch
  // take a barrier at y; its read of x must still be remembered, so that filling x next
  // waits for the dispatch (else: a write-after-read hazard the validation layer reports).
  vk::Device& dev = device();
  const uint32_t n = 1024;
  vk::Buffer bx(dev, n * 4, Category::Activations, "x"), by(dev, n * 4, Category::Activations, "y");
  vk::Commands cmd(dev, "fill, axpy, fill");
  cmd.fill(by);
  cmd.fill(bx);
  cmd.after_earlier_submissions();
  cmd.fill(by);
  cmd.dispatch(dev.kernel("axpy"), {bx, by}, shaders::AxpyPush{n, 1.0f}, {vk::groups_for(n, BRIGADE_WG_1D)});
  cmd.fill(bx, 0x3f800000u);  // 1.0f
  cmd.run();
  CHECK(cmd.barriers() == 3);
  std::vector<float> x(n);
  vk::download(bx, x.data(), n * 4);
  CHECK(x[n - 1] == 1.0f);
}

TEST_CASE_FIXTURE(test::Gpu, "parts of an arena are ordered against the arena, not against each other") {
  // Two parts of one arena written by independent dispatches need no barrier; a fill of the
  // whole arena after them must wait for both (the validation layer reports the hazard
  // otherwise), and reading a part after the fill waits for the fill.
  vk::Device& dev = device();
  const uint32_t n = 100;  // not a multiple of the arena's alignment: padding between the parts
  const vk::ArenaLayout layout = vk::arena_layout({n * 4ull, n * 4ull});
  REQUIRE(layout.offsets[1] == vk::kArenaAlign * 2);
  vk::Buffer arena(dev, layout.bytes, Category::Gradients, "arena");
  vk::Buffer p0(arena, layout.offsets[0], n * 4, "part 0"), p1(arena, layout.offsets[1], n * 4, "part 1");
  CHECK(&p1.whole() == &arena);
  CHECK(p1.offset_in_whole() == layout.offsets[1]);
  CHECK(&arena.whole() == &arena);
  std::vector<float> ones(n, 1.0f);
  vk::Buffer x(dev, n * 4, Category::Activations, "x"), y(dev, n * 4, Category::Activations, "y");
  vk::upload(x, ones.data(), n * 4);
  vk::Commands cmd(dev, "parts");
  cmd.fill(arena, 0);
  const vk::Groups g{vk::groups_for(n, BRIGADE_WG_1D)};
  cmd.dispatch(dev.kernel("axpy"), {x, p0}, shaders::AxpyPush{n, 2.0f}, g);  // after the fill: barrier
  cmd.dispatch(dev.kernel("axpy"), {x, p1}, shaders::AxpyPush{n, 3.0f}, g);  // another part: none
  CHECK(cmd.barriers() == 1);
  cmd.fill(vk::View(arena, 0, layout.offsets[1]), 0x40800000u);  // 4.0f over part 0: barrier
  CHECK(cmd.barriers() == 2);
  cmd.fill(y, 0);
  cmd.dispatch(dev.kernel("axpy"), {p0, y}, shaders::AxpyPush{n, 1.0f}, g);  // reads part 0: barrier
  cmd.run();
  CHECK(cmd.barriers() == 3);
  std::vector<float> out(n), part1(n);
  vk::download(y, out.data(), n * 4);
  vk::download(p1, part1.data(), n * 4);
  CHECK(out[n - 1] == 4.0f);
  CHECK(part1[0] == 3.0f);
  CHECK_THROWS_AS(vk::Buffer(arena, 4, 16, "misaligned"), vk::VulkanError);
  CHECK_THROWS_AS(vk::Buffer(arena, layout.offsets[1], layout.bytes, "too long"), vk::VulkanError);
}

}  // namespace vk_dispatch_test
