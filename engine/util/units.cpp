#include "util/units.h"

#include <cctype>
#include <charconv>
#include <cstdio>

#include "util/error.h"

namespace brigade {

uint64_t parse_size(std::string_view text, std::string_view what) {
  auto bad = [&](const char* why) -> UserError {
    return UserError(std::string(what) + ": '" + std::string(text) + "' " + why +
                     "; expected a size such as 512MiB, 2GiB, 64KiB or a byte count");
  };
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0) throw bad("does not start with a number");
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + i, value);
  if (ec != std::errc() || end != text.data() + i) throw bad("is too large");
  std::string_view unit = text.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  uint64_t scale = 1;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "KiB" || unit == "K") scale = 1ull << 10;
  else if (unit == "MiB" || unit == "M") scale = 1ull << 20;
  else if (unit == "GiB" || unit == "G") scale = 1ull << 30;
  else if (unit == "TiB" || unit == "T") scale = 1ull << 40;
  else throw bad("has an unknown unit (use B, KiB, MiB, GiB or TiB)");
  if (value > UINT64_MAX / scale) throw bad("is too large");
  if (value == 0) throw bad("is zero");
  return value * scale;
}

std::vector<uint64_t> parse_size_list(std::string_view text, std::string_view what) {
  std::vector<uint64_t> sizes;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    sizes.push_back(parse_size(text.substr(start, comma - start), what));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return sizes;
}

std::string format_number(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", value);
  return buf;
}

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) v /= 1024.0, ++u;
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

std::optional<std::vector<uint32_t>> parse_uint_list(std::string_view text) {
  std::vector<uint32_t> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    uint32_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size()) return std::nullopt;
    out.push_back(v);
    if (comma == text.size()) return out;
    start = comma + 1;
  }
}

}  // namespace brigade
