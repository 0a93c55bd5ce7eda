#include "bench_tilings.h"

#include <bit>
#include <chrono>
#include <cmath>

#include "ops/matmul_tiles.h"
#include "shaders/precision.h"
#include "util/stats.h"

namespace brigade::cli {

ops::Precision bench_precision(const std::string& text, const vk::PhysicalInfo& info) {
  return text == "auto" ? ops::auto_precision(info) : ops::parse_precision(text);
}

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint64_t s = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (auto& x : v) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x = float((s >> 40) & 0xFFFFFF) / float(1 << 23) - 1.0f;
  }
  return v;
}

std::vector<uint32_t> stored_words(const std::vector<float>& v, ops::Precision format) {
  if (format == ops::Precision::Fp32) return std::vector<uint32_t>(reinterpret_cast<const uint32_t*>(v.data()),
                                                                   reinterpret_cast<const uint32_t*>(v.data() + v.size()));
  std::vector<uint32_t> words((v.size() + 1) / 2, 0);
  for (size_t i = 0; i < v.size(); ++i)
    words[i / 2] |= shaders::half_from_bits(std::bit_cast<uint32_t>(v[i]), uint32_t(format)) << (i % 2 ? 16 : 0);
  return words;
}

std::vector<std::vector<double>> alternated_ms(vk::Commands& cmd, size_t runs, size_t parts, int reps,
                                               const std::function<void(vk::Commands&, size_t, size_t)>& record) {
  // Every run's parts once, with a timestamp around each where `marks` is given.
  const auto all = [&](std::vector<uint32_t>* marks) {
    for (size_t i = 0; i < runs; ++i)
      for (size_t j = 0; j < parts; ++j) {
        if (marks) marks->push_back(cmd.timestamp());
        record(cmd, i, j);
        if (marks) marks->push_back(cmd.timestamp());
      }
  };
  // A GPU idle while the host checked the results runs at a low clock: untimed rounds until a
  // batch of them is no faster than the one before, for a second at least and three at most (a
  // quarter of a second alone left the first case after a full 1024^3 reference at a fifth of
  // its speed on an H200).
  if (cmd.device().info().type != VK_PHYSICAL_DEVICE_TYPE_CPU) {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    double before = INFINITY;
    for (;;) {
      const auto t0 = Clock::now();
      cmd.reset();
      for (int r = 0; r < reps; ++r) all(nullptr);
      cmd.run();
      const auto now = Clock::now();
      const double batch = std::chrono::duration<double>(now - t0).count();
      const bool steady = batch >= 0.98 * before;
      before = batch;
      if ((steady && now - start >= std::chrono::seconds(1)) || now - start >= std::chrono::seconds(3)) break;
    }
  }
  std::vector<std::vector<std::vector<double>>> ms(runs, std::vector<std::vector<double>>(parts));
  for (int r = 0; r < reps; ++r) {
    cmd.reset();
    std::vector<uint32_t> marks;
    all(&marks);
    cmd.run();
    const std::vector<double> ts = cmd.timestamps_ns();
    for (size_t i = 0, at = 0; i < runs; ++i)
      for (size_t j = 0; j < parts; ++j, at += 2) ms[i][j].push_back((ts[marks[at + 1]] - ts[marks[at]]) * 1e-6);
  }
  std::vector<std::vector<double>> out(runs);
  for (size_t i = 0; i < runs; ++i)
    for (const std::vector<double>& m : ms[i]) out[i].push_back(median(m));
  return out;
}

}  // namespace brigade::cli
