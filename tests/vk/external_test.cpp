// Boundary memory shared between two devices: opaque fd (one driver) and host pointer
// (any two drivers), written by one device's kernel and read by the other's.
#include <doctest/doctest.h>

#include <fcntl.h>

#include <atomic>
#include <thread>
#include <vector>

#include "gpu.h"
#include "shaders/push.h"
#include "vk/commands.h"
#include "vk/external.h"

namespace vk_external_test {
// close() calls, from the engine or this suite, of an fd that was not open: a second close of
// a number the driver already closed (which, in a process with other threads, may by then
// be another file's).
std::atomic<int> closes_of_closed_fds{0};
}  // namespace vk_external_test

// The test program is linked with --wrap=close (tests/CMakeLists.txt).
extern "C" int __real_close(int fd);
extern "C" int __wrap_close(int fd) {
  if (fcntl(fd, F_GETFD) == -1) ++vk_external_test::closes_of_closed_fds;
  return __real_close(fd);
}

namespace vk_external_test {

using namespace brigade;
using vk::Category;

namespace {

// Device a computes 3*x into the shared buffer; device b, ordered after a by a timeline
// relayed through the host, computes 2 * shared into its own output.
void produce_and_consume(vk::Device& a, vk::Device& b, vk::SharedBuffer& shared, uint32_t n) {
  std::vector<float> ones(n, 1.0f);
  vk::Buffer x(a, n * 4, Category::Activations, "x");
  vk::upload(x, ones.data(), n * 4);
  vk::Buffer out(b, n * 4, Category::Activations, "out");
  vk::Timeline a_done(a, "a done"), b_go(b, "b go");
  const vk::Groups g{vk::groups_for(n, BRIGADE_WG_1D)};

  vk::Commands consume(b, "consume");
  consume.fill(out, 0);
  consume.dispatch(b.kernel("axpy"), {shared.second, out}, shaders::AxpyPush{n, 2.0f}, g);
  consume.submit({b_go.at(1)});
  std::thread relay([&] {
    a_done.wait(1);
    b_go.signal(1);
  });
  vk::Commands produce(a, "produce");
  produce.fill(shared.first, 0);
  produce.dispatch(a.kernel("axpy"), {x, shared.first}, shaders::AxpyPush{n, 3.0f}, g);
  produce.submit({}, {a_done.at(1)});
  relay.join();
  produce.wait();
  consume.wait();
  std::vector<float> result(n);
  vk::download(out, result.data(), n * 4);
  size_t bad = 0;
  for (float v : result) bad += v != 6.0f;
  CHECK_MESSAGE(bad == 0, bad, " of ", n, " elements did not cross between the devices");
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "two logical devices of one driver share memory through an opaque fd") {
  vk::Device& a = device(0);
  vk::Device& b = device(1);
  REQUIRE(vk::can_share_fd(a, b));
  const uint32_t n = 100003;
  vk::SharedBuffer shared = vk::share_fd(a, b, n * 4, Category::Transfer, "boundary");
  CHECK(a.memory().stats().current[int(Category::Transfer)] == n * 4);
  CHECK(b.memory().stats().current[int(Category::Transfer)] == n * 4);
  produce_and_consume(a, b, shared, n);
}

TEST_CASE_FIXTURE(test::Gpu, "one host allocation imported into two devices carries data between them") {
  vk::Device& a = device(0);
  vk::Device& b = device(1);
  REQUIRE(vk::can_share_host(a, b));
  const uint32_t n = 77777;
  vk::SharedBuffer shared = vk::share_host(a, b, n * 4, Category::Transfer, "boundary");
  CHECK(shared.first.mapped() == shared.host.get());
  CHECK(shared.second.mapped() == shared.host.get());
  produce_and_consume(a, b, shared, n);
}

TEST_CASE_FIXTURE(test::Gpu, "shared boundary buffers count against each device's cap") {
  vk::Device& a = device(0, 1 << 20);
  vk::Device& b = device(1);
  CHECK_THROWS_WITH_AS(vk::share_fd(a, b, 2 << 20, Category::Transfer, "too big"),
                       doctest::Contains("transfer buffers (too big (exported)) needs 2.0 MiB"),
                       vk::OutOfMemory);
  CHECK_THROWS_AS(vk::share_host(a, b, 2 << 20, Category::Transfer, "too big"), vk::OutOfMemory);
  CHECK(a.memory().stats().total_current == 0);
  CHECK(b.memory().stats().total_current == 0);
}

TEST_CASE_FIXTURE(test::Gpu, "an fd import refused after the driver took the fd closes it no second time") {
  vk::Device& a = device(0);
  vk::Device& b = device(1, 1000);  // the import succeeds; charging its 4 KiB to b's cap fails
  const int before = closes_of_closed_fds;
  CHECK_THROWS_WITH_AS(vk::share_fd(a, b, 4096, Category::Transfer, "over the cap"),
                       doctest::Contains("(over the cap (imported)) needs 4.0 KiB"), vk::OutOfMemory);
  CHECK(closes_of_closed_fds == before);
  CHECK(a.memory().stats().total_current == 0);
  CHECK(b.memory().stats().total_current == 0);
}

TEST_CASE("an opaque fd is imported only where the importer's buffer takes its memory type and size") {
  VkMemoryRequirements importer{};
  importer.size = 4096, importer.alignment = 64, importer.memoryTypeBits = 0b110;
  CHECK(vk::fd_import_problem(1, 4096, importer).empty());
  CHECK(vk::fd_import_problem(2, 8192, importer).empty());
  CHECK(vk::fd_import_problem(0, 4096, importer).find("memory type 0") != std::string::npos);
  CHECK(vk::fd_import_problem(1, 2048, importer).find("needs 4096 bytes") != std::string::npos);
}

TEST_CASE_FIXTURE(test::Gpu, "a recording takes shared memory from the external queue family and gives it back") {
  vk::Device& a = device(0);
  vk::Device& b = device(1);
  for (const bool fd : {true, false}) {
    INFO((fd ? "opaque fd" : "host pointer"));
    vk::SharedBuffer shared = fd ? vk::share_fd(a, b, 1024, Category::Transfer, "boundary")
                                 : vk::share_host(a, b, 1024, Category::Transfer, "boundary");
    vk::Buffer own(a, 1024, Category::Activations, "own");
    vk::Commands write(a, "write");
    write.fill(own, 7);
    CHECK(write.handoffs() == 0);  // memory of its own needs none
    write.copy(own, shared.first, 1024);
    write.fill(vk::View(shared.first, 0, 256), 9);  // taken once per recording
    CHECK(write.handoffs() == 1);
    write.run();
    CHECK(write.handoffs() == 2);
    vk::Commands read(b, "read");
    vk::Buffer out(b, 1024, Category::Activations, "out");
    read.copy(shared.second, out, 1024);
    read.run();
    CHECK(read.handoffs() == 2);
    std::vector<uint32_t> got(256);
    vk::download(out, got.data(), 1024);
    CHECK(got.front() == 9);
    CHECK(got.back() == 7);
  }
}

}  // namespace vk_external_test
