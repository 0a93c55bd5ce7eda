#include <doctest/doctest.h>

#include <vector>

#include "gpu.h"
#include "pipeline/link.h"
#include "shaders/push.h"
#include "vk/commands.h"

namespace pipeline_link_test {

using namespace brigade;
using namespace brigade::pipeline;

TEST_CASE_FIXTURE(test::Gpu, "every link path carries each slot's micro-batch to the next device") {
  vk::Device& a = device(0);
  vk::Device& b = device(1);
  CHECK(choose_link(a, b, LinkKind::Auto).kind == LinkKind::Fd);  // one driver, one device
  const uint32_t n = 5000, slots = 2;
  for (LinkKind kind : {LinkKind::Fd, LinkKind::Host, LinkKind::Staging}) {
    INFO("link ", link_name(kind));
    LinkMemory link(a, b, n * 4, slots, kind, "activations 0->1");
    CHECK(link.kind() == kind);
    for (uint32_t s = 0; s < slots; ++s) {
      std::vector<float> x(n, float(s + 1));
      vk::Buffer src(a, n * 4, vk::Category::Activations, "src");
      vk::upload(src, x.data(), n * 4);
      vk::Commands produce(a, "produce");
      produce.copy(src, link.send(s), n * 4);
      produce.run();
      CHECK(link.relay(s) == (kind == LinkKind::Staging ? n * 4 : 0));
      vk::Buffer out(b, n * 4, vk::Category::Activations, "out");
      vk::Commands consume(b, "consume");
      consume.fill(out, 0);
      consume.dispatch(b.kernel("axpy"), {link.receive(s), out}, shaders::AxpyPush{n, 1.0f},
                       {vk::groups_for(n, BRIGADE_WG_1D)});
      consume.run();
      std::vector<float> got(n);
      vk::download(out, got.data(), n * 4);
      CHECK(got.front() == float(s + 1));
      CHECK(got.back() == float(s + 1));
    }
  }
}

TEST_CASE_FIXTURE(test::Gpu, "a link probe reads each direction's pattern through the consuming device's queue") {
  vk::Device& a = device(0);
  vk::Device& b = device(1);
  for (LinkKind kind : {LinkKind::Fd, LinkKind::Host}) {
    INFO("link ", link_name(kind));
    const uint64_t a_before = a.submitted(), b_before = b.submitted();
    CHECK(link_problem(a, b, kind) == "");
    // Each device writes its direction's pattern, and copies the other's, on its own queue.
    CHECK(a.submitted() - a_before >= 2);
    CHECK(b.submitted() - b_before >= 2);
  }
}

TEST_CASE_FIXTURE(test::Gpu, "a link probe counts against no memory cap") {
  // A cap too small for the probe's buffers: the plan, not the probe, refuses what it cannot hold.
  vk::Device& a = device(0, 100);
  vk::Device& b = device(1, 100);
  CHECK(choose_link(a, b, LinkKind::Fd).kind == LinkKind::Fd);
  CHECK(choose_link(a, b, LinkKind::Host).kind == LinkKind::Host);
  CHECK(choose_link(a, b, LinkKind::Auto).kind == LinkKind::Fd);
  CHECK(a.memory().stats().total_peak == 0);
  CHECK(b.memory().stats().total_peak == 0);
}

TEST_CASE("link paths parse and bad ones are refused") {
  CHECK(parse_link("host") == LinkKind::Host);
  CHECK_THROWS_WITH_AS(parse_link("nvlink"), doctest::Contains("`link`: 'nvlink' is not a path"), UserError);
}

}  // namespace pipeline_link_test
