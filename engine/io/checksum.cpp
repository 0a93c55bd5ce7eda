#include "io/checksum.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>

namespace brigade::io {

std::string checksum(std::span<const uint8_t> bytes, const std::string& running) {
  uLong crc = running.empty() ? crc32(0L, Z_NULL, 0) : std::stoul(running, nullptr, 16);
  for (size_t at = 0; at < bytes.size();) {  // zlib takes at most 4 GiB a call
    const size_t n = std::min<size_t>(bytes.size() - at, size_t(1) << 30);
    crc = crc32(crc, bytes.data() + at, uInt(n));
    at += n;
  }
  char text[9];
  std::snprintf(text, sizeof text, "%08lx", static_cast<unsigned long>(crc & 0xFFFFFFFFul));
  return text;
}

}  // namespace brigade::io
