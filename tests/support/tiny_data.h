// Small datasets written for tests: Fashion-MNIST-shaped IDX .gz files whose labels can be
// learnt from the pixels, a text file, and a batch file for `brigade step`.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace brigade::test {

// gzip's format (a .gz file's bytes) of `raw`, as gzip(1) writes it.
inline std::vector<uint8_t> gzip(const std::vector<uint8_t>& raw) {
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::vector<uint8_t> out(deflateBound(&z, uLong(raw.size())) + 32);
  z.next_in = const_cast<Bytef*>(raw.data());
  z.avail_in = uInt(raw.size());
  z.next_out = out.data();
  z.avail_out = uInt(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

inline void write_gz(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), unsigned(bytes.size()));
  gzclose(f);
}

inline void put_be32(std::vector<uint8_t>& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(v >> s));
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
}

// `train` and `test` 28x28 images in `dir`, as .gz files or (`gzipped` false) uncompressed
// ones; image i of class c = i % 10 is bright in the c-th row band, plus noise.
inline void write_tiny_fashion(const std::filesystem::path& dir, uint32_t train, uint32_t test, bool gzipped = true) {
  std::filesystem::create_directories(dir);
  std::mt19937 rng(5);
  for (auto [prefix, n] : {std::pair{"train", train}, std::pair{"t10k", test}}) {
    std::vector<uint8_t> images{0, 0, 8, 3}, labels{0, 0, 8, 1};
    put_be32(images, n), put_be32(images, 28), put_be32(images, 28);
    put_be32(labels, n);
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t c = (i * 7 + 3) % 10;
      labels.push_back(uint8_t(c));
      for (uint32_t y = 0; y < 28; ++y)
        for (uint32_t x = 0; x < 28; ++x)
          images.push_back(uint8_t((y / 3 == c ? 200 : 20) + rng() % 40));
    }
    for (auto [name, bytes] : {std::pair{"-images-idx3-ubyte", &images}, std::pair{"-labels-idx1-ubyte", &labels}}) {
      const std::filesystem::path path = dir / (std::string(prefix) + name);
      if (gzipped)
        write_gz(path.string() + ".gz", *bytes);
      else
        write_text(path, std::string(bytes->begin(), bytes->end()));
    }
  }
}

// A batch for `brigade step`: `rows` random images in [0, 1) as `input` F32 [rows,1,28,28]
// and targets 0, 1, ... 9, 0, ... as `target` I32 [rows].
inline void write_image_batch(const std::filesystem::path& path, uint32_t rows) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> images(rows * 784);
  for (float& v : images) v = u(rng);
  std::vector<int32_t> targets(rows);
  for (uint32_t i = 0; i < rows; ++i) targets[i] = int32_t(i % 10);
  io::SafeTensorsWriter w;
  w.add("input", {rows, 1, 28, 28}, images);
  w.add("target", {rows}, targets);
  w.write(path.string());
}

}  // namespace brigade::test
