// GPU timestamps: valid bits, a counter's wrap, and the host's clock.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "gpu.h"
#include "vk/clock.h"
#include "vk/commands.h"
#include "vk/device.h"

namespace vk_clock_test {

using namespace brigade;

TEST_CASE("timestamps count only their valid bits, and a counter that wraps within a recording goes on") {
  // 36 valid bits (the fewest a compute queue may have): bits above them are not the counter's.
  const uint64_t wrap = uint64_t(1) << 36, junk = uint64_t(0xABC) << 40;
  CHECK(vk::timestamps_ns({junk | 100, junk | 250}, 36, 1.0) == std::vector<double>{100, 250});
  // Written 40 ticks before the counter wraps and 60 after: 100 ticks apart, at 52 ns a tick.
  const std::vector<double> ns = vk::timestamps_ns({wrap - 40, 60}, 36, 52.0);
  CHECK(ns[1] - ns[0] == doctest::Approx(100 * 52.0));
  CHECK(ns[0] == doctest::Approx(double(wrap - 40) * 52.0));
  // 64 bits: taken as they are.
  CHECK(vk::timestamps_ns({5, ~uint64_t(0) - 1}, 64, 1.0)[1] == doctest::Approx(double(~uint64_t(0) - 1)));
  CHECK(vk::timestamps_ns({}, 36, 1.0).empty());
}

TEST_CASE("a GPU timestamp is placed on the host's clock from a calibration, across the counter's wrap") {
  const double wrap_us = vk::GpuClock::wrap_of(36, 1.0);  // 68.7 s of nanoseconds
  CHECK(wrap_us == doctest::Approx(68719476.736));
  CHECK(vk::GpuClock::wrap_of(64, 1.0) == 0);
  const vk::GpuClock clock{1000.0, wrap_us - 10.0, wrap_us};  // calibrated 10 us before a wrap
  CHECK(clock.host_at((wrap_us - 4.0) * 1000) == doctest::Approx(1006.0));
  CHECK(clock.host_at(25.0 * 1000) == doctest::Approx(1035.0));  // 25 us after the wrap
  const vk::GpuClock wide{1000.0, 500.0, 0};
  CHECK(wide.host_at(700.0 * 1000) == doctest::Approx(1200.0));
}

// Both ways of calibrating place a timestamp a recording writes between the host's readings
// around its submission (lavapipe lists VK_EXT_calibrated_timestamps; the submissions' way is
// what devices without it take).
TEST_CASE_FIXTURE(test::Gpu, "a device's calibrated clock places a timestamp it writes between the host's readings around it") {
  vk::Device& dev = device();
  REQUIRE(dev.info().timestamps);
  CHECK(dev.info().calibrated_timestamps);  // lavapipe's: CLOCK_MONOTONIC and its own counter
  using vk::now_us;
  vk::Commands c(dev, "a timestamp");
  for (int calibrated = 0; calibrated < 2; ++calibrated) {
    vk::PhysicalInfo& info = const_cast<vk::PhysicalInfo&>(dev.info());
    const bool listed = info.calibrated_timestamps;
    info.calibrated_timestamps = listed && calibrated;  // the submissions' way first
    const vk::GpuClock clock = vk::calibrate_clock(dev);
    info.calibrated_timestamps = listed;
    c.reset();
    c.timestamp();
    const double before = now_us();
    c.run();
    const double after = now_us();
    const double at = clock.host_at(c.timestamps_ns().at(0));
    const std::string way = calibrated ? "read together" : "by submissions";
    INFO(way, ": the timestamp ", at - before, " us after the submission began, which took ", after - before, " us");
    // Within a millisecond: the submissions' way is off by up to half its tightest window,
    // wider on a loaded machine; a wrong unit or epoch is off by far more.
    CHECK(at >= before - 1000.0);
    CHECK(at <= after + 1000.0);
  }
}

}  // namespace vk_clock_test
