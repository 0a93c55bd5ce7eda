#include "vk/clock.h"

#include <cmath>

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

}  // namespace brigade::vk
