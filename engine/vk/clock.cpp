#include "vk/clock.h"

#include <chrono>
#include <cmath>

#include "vk/commands.h"
#include "vk/device.h"

namespace brigade::vk {

std::vector<double> timestamps_ns(const std::vector<uint64_t>& raw, uint32_t valid_bits, double period_ns) {
  std::vector<double> out;
  if (raw.empty()) return out;
  const uint64_t mask = valid_bits >= 64 ? ~uint64_t(0) : (uint64_t(1) << valid_bits) - 1;
  const uint64_t first = raw[0] & mask;
  for (uint64_t t : raw) out.push_back(double(first + (((t & mask) - first) & mask)) * period_ns);
  return out;
}

double GpuClock::wrap_of(uint32_t valid_bits, double period_ns) {
  return valid_bits >= 64 ? 0 : std::ldexp(period_ns / 1000.0, int(valid_bits));
}

double GpuClock::host_at(double gpu_ns) const {
  double since = gpu_ns / 1000.0 - gpu_us;
  if (since < 0 && wrap_us > 0) since += wrap_us;  // the counter wrapped since the calibration
  return host_us + since;
}

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

GpuClock calibrate_clock(Device& dev) {
  const PhysicalInfo& info = dev.info();
  GpuClock clock;
  clock.wrap_us = GpuClock::wrap_of(info.timestamp_valid_bits, info.timestamp_period_ns);
  if (info.calibrated_timestamps) {
    uint64_t ticks = 0, host_ns = 0;
    dev.calibrated_clocks(ticks, host_ns);
    clock.gpu_us = timestamps_ns({ticks}, info.timestamp_valid_bits, info.timestamp_period_ns)[0] / 1000.0;
    clock.host_us = double(host_ns) / 1000.0;
    return clock;
  }
  Commands c(dev, "clock calibration");
  double window = INFINITY;
  for (int i = 0; i < 5; ++i) {  // the first also pays one-time costs
    c.reset();
    c.timestamp();
    const double before = now_us();
    c.run();
    const double after = now_us();
    if (after - before < window)
      window = after - before, clock.host_us = (before + after) / 2, clock.gpu_us = c.timestamps_ns().at(0) / 1000.0;
  }
  return clock;
}

}  // namespace brigade::vk
