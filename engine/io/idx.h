// IDX files (the MNIST family's format), plain or gzip-compressed, and the Fashion-MNIST
// dataset built from them. Every field is checked before it is trusted.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace brigade::io {

struct IdxArray {
  std::vector<uint32_t> dims;  // e.g. {60000, 28, 28}
  std::vector<uint8_t> data;   // unsigned bytes, row-major
};

// Unsigned-byte IDX (type 0x08) only: what the datasets use. `source` names it in errors.
IdxArray parse_idx(std::span<const uint8_t> bytes, const std::string& source);
IdxArray read_idx(const std::string& path);  // gunzips when the file is gzip

// gzip or zlib data, refused past `limit` bytes of output. Concatenated gzip members are read
// whole, and zero bytes after the end (a block tool's padding) dropped, as gzip -d does.
std::vector<uint8_t> gunzip(std::span<const uint8_t> bytes, const std::string& source,
                            size_t limit = size_t(1) << 30);

struct ImageSet {
  uint32_t count = 0, height = 0, width = 0;
  std::vector<uint8_t> pixels;  // (count, 1, height, width) as stored; a batch takes pixel / 255
  std::vector<int32_t> labels;  // (count)
};

// Fashion-MNIST's train or test split from `dir` (default /usr/share/datasets/fashion-mnist).
ImageSet load_fashion_mnist(const std::string& dir, bool train);

}  // namespace brigade::io
