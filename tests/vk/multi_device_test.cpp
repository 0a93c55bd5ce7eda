// Several logical devices in one process: how every multi-stage pipeline runs on lavapipe.
#include <doctest/doctest.h>

#include <thread>
#include <vector>

#include "gpu.h"
#include "vk/buffer.h"
#include "shaders/push.h"
#include "vk/commands.h"

namespace vk_multi_device_test {

using namespace brigade;
using vk::Category;

TEST_CASE_FIXTURE(test::Gpu, "four logical devices on one physical device work at once") {
  const uint32_t n = 1 << 18;
  constexpr int kDevices = 4;
  std::vector<std::vector<float>> results(kDevices);
  std::vector<vk::Device*> devs;
  for (int d = 0; d < kDevices; ++d) devs.push_back(&device(d));
  for (int d = 1; d < kDevices; ++d) CHECK(devs[d]->handle() != devs[0]->handle());

  std::vector<std::thread> threads;
  std::vector<std::string> errors(kDevices);
  for (int d = 0; d < kDevices; ++d)
    threads.emplace_back([&, d] {
      try {
        vk::Device& dev = *devs[d];
        std::vector<float> ones(n, 1.0f);
        vk::Buffer x(dev, n * 4, Category::Activations, "x"), y(dev, n * 4, Category::Activations, "y");
        vk::upload(x, ones.data(), n * 4);
        vk::Commands cmd(dev, "stage work");
        cmd.fill(y, 0);
        // Each device accumulates its own index + 1, ten times.
        for (int i = 0; i < 10; ++i)
          cmd.dispatch(dev.kernel("axpy"), {x, y}, shaders::AxpyPush{n, float(d + 1)},
                       {vk::groups_for(n, BRIGADE_WG_1D)});
        cmd.run();
        results[d].resize(n);
        vk::download(y, results[d].data(), n * 4);
      } catch (const std::exception& e) {
        errors[d] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int d = 0; d < kDevices; ++d) {
    INFO("device ", d);
    CHECK(errors[d].empty());
    REQUIRE(results[d].size() == n);
    CHECK(results[d][0] == 10.0f * float(d + 1));
    CHECK(results[d][n - 1] == 10.0f * float(d + 1));
  }
}

TEST_CASE_FIXTURE(test::Gpu, "a timeline signal relayed by the host orders work across two devices") {
  // Device B's work is submitted first but waits on its timeline; a host thread signals it
  // only once device A's timeline shows A's result is complete and copied over.
  vk::Device& a = device(0);
  vk::Device& b = device(1);
  const uint32_t n = 1 << 16;
  std::vector<float> ones(n, 1.0f);
  vk::Buffer ax(a, n * 4, Category::Activations, "A x"), ay(a, n * 4, Category::Activations, "A y");
  // B receives into host memory, as the staging link does: an upload through B's queue would
  // wait behind the batch that waits for it (a GPU runs a queue's batches in order).
  vk::Buffer bx(b, n * 4, Category::Transfer, "B received", vk::Residency::Host);
  vk::Buffer by(b, n * 4, Category::Activations, "B y");
  vk::upload(ax, ones.data(), n * 4);
  vk::Timeline a_done(a, "A produced"), b_ready(b, "B may start");

  vk::Commands cb(b, "consumer");
  cb.fill(by, 0);
  cb.dispatch(b.kernel("axpy"), {bx, by}, shaders::AxpyPush{n, 2.0f}, {vk::groups_for(n, BRIGADE_WG_1D)});
  cb.submit({b_ready.at(1)});
  CHECK(!b_ready.wait(1, 1'000'000));  // nothing has signalled yet

  std::thread relay([&] {
    a_done.wait(1);
    // A's output goes to B through the host (the staging link's path).
    std::vector<float> tmp(n);
    vk::download(ay, tmp.data(), n * 4);
    vk::upload(bx, tmp.data(), n * 4);
    b_ready.signal(1);
  });
  vk::Commands ca(a, "producer");
  ca.fill(ay, 0);
  for (int i = 0; i < 3; ++i)
    ca.dispatch(a.kernel("axpy"), {ax, ay}, shaders::AxpyPush{n, 1.0f}, {vk::groups_for(n, BRIGADE_WG_1D)});
  ca.submit({}, {a_done.at(1)});
  relay.join();
  cb.wait();
  ca.wait();
  std::vector<float> out(n);
  vk::download(by, out.data(), n * 4);
  CHECK(out[0] == 6.0f);  // 2 * (3 * 1)
  CHECK(out[n - 1] == 6.0f);
  CHECK(a_done.value() == 1);
  CHECK(b_ready.value() == 1);
}

}  // namespace vk_multi_device_test
