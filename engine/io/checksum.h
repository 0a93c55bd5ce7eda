// CRC-32 (zlib's) as eight hex digits: the caches' keys and a checkpoint's data section.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace brigade::io {

// The CRC-32 of `bytes`, continuing from `running` (a previous result over the bytes before
// them) where given; any length.
std::string checksum(std::span<const uint8_t> bytes, const std::string& running = "");
inline std::string checksum(std::string_view bytes, const std::string& running = "") {
  return checksum(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), running);
}

}  // namespace brigade::io
