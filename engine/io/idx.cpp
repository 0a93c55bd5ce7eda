#include "io/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <utility>

#include "io/files.h"
#include "util/error.h"

namespace brigade::io {

std::vector<uint8_t> gunzip(std::span<const uint8_t> bytes, const std::string& source, size_t limit) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 32) != Z_OK) throw UserError(source + ": zlib init failed");
  std::vector<uint8_t> out;
  // A gzip member ends with its data's size mod 2^32: room for it at once. A hint only (zlib
  // data and concatenated members grow as they come), and never more than deflate's largest
  // ratio, about 1032:1, could give.
  if (bytes.size() >= 18 && bytes[0] == 0x1f && bytes[1] == 0x8b) {
    const uint8_t* t = bytes.data() + bytes.size() - 4;
    const size_t said = uint32_t(t[0]) | uint32_t(t[1]) << 8 | uint32_t(t[2]) << 16 | uint32_t(t[3]) << 24;
    out.reserve(std::min({limit, said, bytes.size() * 1032}));
  }
  constexpr size_t kPiece = size_t(256) << 10;
  const auto piece = std::make_unique<uint8_t[]>(kPiece);
  // zlib counts its input in uInt (32 bits): fed at most 1 GiB at a time, the rest after.
  constexpr size_t kFeed = size_t(1) << 30;
  size_t fed = 0;  // bytes handed to zlib so far
  auto feed = [&] {
    const size_t n = std::min(kFeed, bytes.size() - fed);
    z.next_in = const_cast<Bytef*>(bytes.data() + fed);
    z.avail_in = uInt(n);
    fed += n;
  };
  feed();
  int r = Z_OK;
  while (true) {
    if (r == Z_STREAM_END) {
      // Concatenated gzip members (cat a.gz b.gz) decompress to the concatenated data, as
      // gzip -d gives; zero bytes after the end (the padding block tools leave) are dropped,
      // as gzip -d drops them; anything else after the end is refused rather than dropped.
      const std::span<const uint8_t> rest = bytes.subspan(size_t(z.next_in - bytes.data()));
      if (rest.empty() || (rest[0] == 0 && std::memcmp(rest.data(), rest.data() + 1, rest.size() - 1) == 0)) break;
      if (rest.size() < 2 || rest[0] != 0x1f || rest[1] != 0x8b) {
        inflateEnd(&z);
        throw UserError(source + ": " + std::to_string(rest.size()) +
                        " bytes follow the end of the compressed data (expected another gzip member, zero "
                        "padding or nothing)");
      }
      if (inflateReset(&z) != Z_OK) {
        inflateEnd(&z);
        throw UserError(source + ": zlib reset failed");
      }
    }
    if (out.size() >= limit) {
      inflateEnd(&z);
      throw UserError(source + ": decompresses to more than " + std::to_string(limit) + " bytes");
    }
    if (z.avail_in == 0 && fed < bytes.size()) feed();
    z.next_out = piece.get();
    z.avail_out = uInt(kPiece);
    r = inflate(&z, Z_NO_FLUSH);
    out.insert(out.end(), piece.get(), piece.get() + (kPiece - z.avail_out));
    if (r == Z_BUF_ERROR && z.avail_in == 0) r = fed < bytes.size() ? Z_OK : Z_DATA_ERROR;  // ended mid-stream
    if (r != Z_OK && r != Z_STREAM_END) {
      inflateEnd(&z);
      throw UserError(source + ": corrupt or truncated gzip data (" + (z.msg ? z.msg : "unexpected end") + ")");
    }
  }
  inflateEnd(&z);
  return out;
}

namespace {

// An IDX array's dimensions and the bytes of its header; refuses what parse_idx refuses.
std::pair<std::vector<uint32_t>, size_t> idx_header(std::span<const uint8_t> b, const std::string& source) {
  auto bad = [&](const std::string& why) { return UserError(source + ": not a valid IDX file: " + why); };
  if (b.size() < 4) throw bad("shorter than its 4-byte magic number");
  if (b[0] != 0 || b[1] != 0) throw bad("the magic number does not start with two zero bytes");
  if (b[2] != 0x08) {
    char type[8];
    std::snprintf(type, sizeof type, "0x%02x", b[2]);
    throw bad(std::string("element type ") + type + " is not unsigned byte (0x08)");
  }
  const uint32_t rank = b[3];
  if (rank == 0 || rank > 4) throw bad("has " + std::to_string(rank) + " dimensions; expected 1 to 4");
  if (b.size() < 4 + 4 * rank)
    throw bad("ends inside its dimension sizes (" + std::to_string(b.size()) + " bytes; " +
              std::to_string(rank) + " dimensions need a " + std::to_string(4 + 4 * rank) + "-byte header)");
  std::vector<uint32_t> dims;
  uint64_t n = 1;
  for (uint32_t i = 0; i < rank; ++i) {
    const uint8_t* p = &b[4 + 4 * i];
    const uint32_t d = uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
    dims.push_back(d);
    if (d && n > (uint64_t(1) << 34) / d) throw bad("dimensions multiply past 16 GiB");  // before it wraps
    n *= d;
  }
  const uint64_t have = b.size() - (4 + 4 * rank);
  if (have != n)
    throw bad("the dimensions promise " + std::to_string(n) + " bytes of data but the file holds " + std::to_string(have));
  return {std::move(dims), 4 + 4 * rank};
}

}  // namespace

IdxArray parse_idx(std::span<const uint8_t> b, const std::string& source) {
  auto [dims, header] = idx_header(b, source);
  return {std::move(dims), std::vector<uint8_t>(b.begin() + header, b.end())};
}

IdxArray read_idx(const std::string& path) {
  std::vector<uint8_t> bytes = read_bytes(path);
  auto [dims, header] = idx_header(bytes, path);
  bytes.erase(bytes.begin(), bytes.begin() + ptrdiff_t(header));  // in place, not a second copy
  return {std::move(dims), std::move(bytes)};
}

namespace {

// `dir`/`name`.gz, else `dir`/`name` uncompressed (read_idx tells them by their bytes).
std::string fashion_file(const std::string& dir, const std::string& name) {
  std::error_code ec;
  for (const std::string& path : {dir + "/" + name + ".gz", dir + "/" + name})
    if (std::filesystem::exists(path, ec)) return path;
  throw UserError(dir + "/" + name + ".gz: not found, nor " + name +
                  "; install Debian's dataset-fashion-mnist or pass `data` DIR holding the four *-idx*-ubyte "
                  "files (gzipped or not)");
}

}  // namespace

ImageSet load_fashion_mnist(const std::string& dir, bool train) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(dir, ec);
  if (std::filesystem::exists(st) && !std::filesystem::is_directory(st))
    throw UserError(dir + ": is " + (std::filesystem::is_regular_file(st) ? "a file" : "not a folder") +
                    "; a Fashion-MNIST model reads `data` DIR, a folder holding the dataset's four *-idx*-ubyte "
                    "files (gzipped or not)");
  const std::string split = train ? "train" : "t10k", prefix = dir + "/" + split;
  const std::string images_path = fashion_file(dir, split + "-images-idx3-ubyte");
  const std::string labels_path = fashion_file(dir, split + "-labels-idx1-ubyte");
  IdxArray images = read_idx(images_path);
  const IdxArray labels = read_idx(labels_path);
  if (images.dims.size() != 3)
    throw UserError(images_path + ": has " + std::to_string(images.dims.size()) +
                    " dimensions; expected 3 (count, rows, cols)");
  if (labels.dims.size() != 1)
    throw UserError(labels_path + ": has " + std::to_string(labels.dims.size()) +
                    " dimensions; expected 1 (count)");
  if (images.dims[1] != 28 || images.dims[2] != 28)
    throw UserError(images_path + ": images of " + std::to_string(images.dims[1]) + "x" +
                    std::to_string(images.dims[2]) + " pixels; expected Fashion-MNIST's 28x28");
  if (images.dims[0] == 0)
    throw UserError(images_path + ": holds 0 images; the " + (train ? "training" : "test") + " split needs at least one");
  if (images.dims[0] != labels.dims[0])
    throw UserError(prefix + ": " + std::to_string(images.dims[0]) + " images but " +
                    std::to_string(labels.dims[0]) + " labels");
  ImageSet set;
  set.count = images.dims[0];
  set.height = images.dims[1];
  set.width = images.dims[2];
  set.pixels = std::move(images.data);
  set.labels.resize(set.count);
  for (uint32_t i = 0; i < set.count; ++i) {
    if (labels.data[i] >= 10)
      throw UserError(labels_path + ": label " + std::to_string(labels.data[i]) + " at index " +
                      std::to_string(i) + " is not a class 0..9");
    set.labels[i] = labels.data[i];
  }
  return set;
}

}  // namespace brigade::io
