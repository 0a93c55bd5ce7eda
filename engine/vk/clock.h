// GPU timestamps: a queue's raw counter values in nanoseconds, and on the host's clock.
#pragma once

#include <cstdint>
#include <vector>

namespace brigade::vk {

class Device;

// Host time in microseconds of the steady clock (CLOCK_MONOTONIC): what trace times are
// measured in, and what GpuClock places a device's timestamps on.
double now_us();

// Raw values of one recording's timestamps, in the order written, in nanoseconds: only the
// queue family's `valid_bits` count, and a counter that wrapped within the recording goes on
// past its range (a recording is far shorter than a wrap: 68 s at the least, 36 bits of
// nanoseconds).
std::vector<double> timestamps_ns(const std::vector<uint64_t>& raw, uint32_t valid_bits, double period_ns);

// A GPU timestamp and the host's steady clock at the same moment (a calibration), and how far
// the GPU's counter runs before it wraps (0: not within 64 bits).
struct GpuClock {
  double host_us = 0, gpu_us = 0, wrap_us = 0;
  static double wrap_of(uint32_t valid_bits, double period_ns);
  // The host's clock at GPU timestamp `gpu_ns`, written after the calibration and less than
  // one wrap after it.
  double host_at(double gpu_ns) const;
};

// The device's clock against the host's steady clock (CLOCK_MONOTONIC): read together where
// the device can (VK_EXT_calibrated_timestamps: nothing submitted), else a timestamp written
// by a submission between two host readings, the tightest of a few placed best.
GpuClock calibrate_clock(Device& dev);

}  // namespace brigade::vk
