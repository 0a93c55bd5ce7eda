#include <doctest/doctest.h>

#include <vector>

#include "gpu.h"
#include "shaders/push.h"
#include "vk/buffer.h"
#include "vk/commands.h"

namespace vk_replay_test {

using namespace brigade;
using vk::Category;

namespace {

constexpr uint32_t kN = 1000;

// y += alpha * x, recorded into `cmd`.
void axpy(vk::Commands& cmd, const vk::Buffer& x, const vk::Buffer& y, float alpha) {
  vk::Device& dev = cmd.device();
  cmd.dispatch(dev.kernel("axpy"), {x, y}, shaders::AxpyPush{kN, alpha}, {vk::groups_for(kN, BRIGADE_WG_1D)});
}

float first(const vk::Buffer& b) {
  float v = 0;
  vk::download(b, &v, 4);
  return v;
}

struct Buffers {
  explicit Buffers(vk::Device& dev)
      : x(dev, kN * 4, Category::Activations, "x"), y(dev, kN * 4, Category::Activations, "y"),
        z(dev, kN * 4, Category::Activations, "z") {
    const std::vector<float> ones(kN, 1.0f);
    vk::upload(x, ones.data(), kN * 4);
    vk::zero(y), vk::zero(z);
  }
  vk::Buffer x, y, z;
};

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "a recording made again with the same calls is submitted again, not recorded") {
  Buffers b(device());
  vk::Commands cmd(device(), "replayed");
  cmd.set_replay(true);
  for (int run = 1; run <= 3; ++run) {
    cmd.reset();
    cmd.after_earlier_submissions();
    cmd.fill(b.z, 0);
    axpy(cmd, b.x, b.y, 2.0f);
    axpy(cmd, b.x, b.z, 3.0f);
    cmd.run();
    // Each run really ran: y accumulates, z is cleared first.
    CHECK(first(b.y) == 2.0f * float(run));
    CHECK(first(b.z) == 3.0f);
    CHECK(cmd.replays() == uint64_t(run - 1));
  }
  CHECK(cmd.dispatches() == 6);  // counted for every run, replayed or not
}

TEST_CASE_FIXTURE(test::Gpu, "replay is off unless asked for") {
  Buffers b(device());
  vk::Commands cmd(device(), "recorded");
  for (int run = 1; run <= 2; ++run) {
    cmd.reset();
    axpy(cmd, b.x, b.y, 2.0f);
    cmd.run();
  }
  CHECK(first(b.y) == 4.0f);
  CHECK(cmd.replays() == 0);
}

TEST_CASE_FIXTURE(test::Gpu, "a call that differs records the buffer anew, the calls before it included") {
  Buffers b(device());
  vk::Commands cmd(device(), "diverging");
  cmd.set_replay(true);
  auto run = [&](float alpha, const vk::Buffer& second) {
    cmd.reset();
    axpy(cmd, b.x, b.y, 1.0f);
    axpy(cmd, b.x, second, alpha);
    cmd.run();
  };
  run(1.0f, b.z);  // y 1, z 1
  SUBCASE("another push constant") {
    run(5.0f, b.z);  // y 2, z 6
    CHECK(first(b.y) == 2.0f);
    CHECK(first(b.z) == 6.0f);
    CHECK(cmd.replays() == 0);
    run(5.0f, b.z);  // the new recording is the one kept: y 3, z 11
    CHECK(first(b.y) == 3.0f);
    CHECK(first(b.z) == 11.0f);
    CHECK(cmd.replays() == 1);
  }
  SUBCASE("another buffer") {
    run(1.0f, b.y);  // y 1 + 1 + 1
    CHECK(first(b.y) == 3.0f);
    CHECK(first(b.z) == 1.0f);
    CHECK(cmd.replays() == 0);
  }
  SUBCASE("fewer calls") {
    cmd.reset();
    axpy(cmd, b.x, b.y, 1.0f);
    cmd.run();
    CHECK(first(b.y) == 2.0f);
    CHECK(first(b.z) == 1.0f);
    CHECK(cmd.replays() == 0);
  }
  SUBCASE("more calls") {
    cmd.reset();
    axpy(cmd, b.x, b.y, 1.0f);
    axpy(cmd, b.x, b.z, 1.0f);
    cmd.copy(b.z, b.y, kN * 4);
    cmd.run();
    CHECK(first(b.y) == 2.0f);
    CHECK(cmd.replays() == 0);
  }
}

TEST_CASE_FIXTURE(test::Gpu, "another range or offset of the same buffer is another call") {
  Buffers b(device());
  vk::Commands cmd(device(), "ranges");
  cmd.set_replay(true);
  const std::vector<float> twos(kN, 2.0f);
  auto fill = [&](vk::View v) {
    vk::upload(b.z, twos.data(), kN * 4);
    cmd.reset();
    cmd.fill(v, 0);
    cmd.run();
    std::vector<float> z(kN);
    vk::download(b.z, z.data(), kN * 4);
    return z;
  };
  fill(vk::View(b.z, 0, kN * 4));
  std::vector<float> z = fill(vk::View(b.z, 0, 8));
  CHECK(z[0] == 0.0f);
  CHECK(z[2] == 2.0f);  // past the range: not filled
  z = fill(vk::View(b.z, 256, 8));
  CHECK(z[0] == 2.0f);
  CHECK(z[64] == 0.0f);
  CHECK(cmd.replays() == 0);
  z = fill(vk::View(b.z, 256, 8));
  CHECK(z[64] == 0.0f);
  CHECK(cmd.replays() == 1);
}

TEST_CASE_FIXTURE(test::Gpu, "a replayed recording's timestamps are written again") {
  if (!device().info().timestamps) {
    MESSAGE("not on this device: its compute queue has no timestamps");
    return;
  }
  Buffers b(device());
  vk::Commands cmd(device(), "timed");
  cmd.set_replay(true);
  std::vector<double> before;
  for (int run = 0; run < 2; ++run) {
    cmd.reset();
    CHECK(cmd.timestamp() == 0);
    axpy(cmd, b.x, b.y, 1.0f);
    CHECK(cmd.timestamp() == 1);
    cmd.run();
    const std::vector<double> ts = cmd.timestamps_ns();
    REQUIRE(ts.size() == 2);
    CHECK(ts[1] >= ts[0]);
    if (run == 1) CHECK(ts[0] > before[1]);  // later than the first run's: written again
    before = ts;
  }
  CHECK(cmd.replays() == 1);
}

}  // namespace vk_replay_test
