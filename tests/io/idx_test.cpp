#include <doctest/doctest.h>

#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/idx.h"
#include "tiny_data.h"
#include "util/error.h"

namespace io_idx_test {

using namespace brigade;
using namespace brigade::io;
using test::gzip;

namespace {
std::vector<uint8_t> idx(std::vector<uint32_t> dims, size_t data_bytes) {
  std::vector<uint8_t> b = {0, 0, 0x08, uint8_t(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(d >> s));
  for (size_t i = 0; i < data_bytes; ++i) b.push_back(uint8_t(i * 7));
  return b;
}

std::string refusal(const std::vector<uint8_t>& b) {
  try {
    parse_idx(b, "x.idx");
  } catch (const UserError& e) {
    return e.what();
  }
  return "accepted";
}
}  // namespace

TEST_CASE("an IDX array parses with its dimensions and bytes") {
  const auto a = parse_idx(idx({2, 3, 4}, 24), "x.idx");
  CHECK(a.dims == std::vector<uint32_t>{2, 3, 4});
  REQUIRE(a.data.size() == 24);
  CHECK(a.data[23] == uint8_t(23 * 7));
}

TEST_CASE("malformed IDX files are refused with what is wrong") {
  CHECK(refusal({0, 0}).find("shorter than its 4-byte magic") != std::string::npos);
  CHECK(refusal({1, 0, 8, 1, 0, 0, 0, 0}).find("two zero bytes") != std::string::npos);
  CHECK(refusal({0, 0, 0x0D, 1, 0, 0, 0, 0}).find("x.idx: not a valid IDX file: element type 0x0d is not unsigned byte (0x08)") != std::string::npos);
  CHECK(refusal({0, 0, 8, 0}).find("has 0 dimensions") != std::string::npos);
  CHECK(refusal({0, 0, 8, 2, 0, 0}).find("ends inside its dimension sizes (6 bytes; 2 dimensions need a 12-byte header)") != std::string::npos);
  CHECK(refusal(idx({2, 3}, 5)).find("promise 6 bytes of data but the file holds 5") != std::string::npos);
  CHECK(refusal(idx({2, 3}, 7)).find("promise 6 bytes") != std::string::npos);
  CHECK(refusal(idx({65536, 65536, 65536}, 0)).find("past 16 GiB") != std::string::npos);
  // 2^16 2^18 2^30 = 2^64, which wraps to 0 bytes: refused before the product wraps.
  CHECK(refusal(idx({1u << 16, 1u << 18, 1u << 30}, 0)).find("past 16 GiB") != std::string::npos);
}

TEST_CASE("gzip data decompresses and corrupt or truncated gzip is refused") {
  const auto raw = idx({10, 10}, 100);
  const auto gz = gzip(raw);
  CHECK(gunzip(gz, "x.gz") == raw);
  auto truncated = gz;
  truncated.resize(gz.size() / 2);
  CHECK_THROWS_WITH_AS(gunzip(truncated, "x.gz"), doctest::Contains("x.gz: corrupt or truncated gzip"), UserError);
  auto corrupt = gz;
  corrupt[12] ^= 0xFF;
  corrupt[13] ^= 0xFF;
  CHECK_THROWS_AS(gunzip(corrupt, "x.gz"), UserError);
  const std::vector<uint8_t> zeros(5 << 20, 0);
  CHECK_THROWS_WITH_AS(gunzip(gzip(zeros), "bomb.gz", 1 << 20), doctest::Contains("more than 1048576 bytes"), UserError);
}

TEST_CASE("concatenated gzip members decompress whole, and other bytes after the end are refused") {
  const auto first = idx({4}, 4), second = std::vector<uint8_t>{9, 8, 7};
  auto both = gzip(first);
  const auto more = gzip(second);
  both.insert(both.end(), more.begin(), more.end());  // what `cat a.gz b.gz` gives
  std::vector<uint8_t> want = first;
  want.insert(want.end(), second.begin(), second.end());
  CHECK(gunzip(both, "x.gz") == want);
  auto trailing = gzip(first);
  trailing.push_back(0);
  trailing.push_back(1);
  CHECK_THROWS_WITH_AS(gunzip(trailing, "x.gz"),
                       doctest::Contains("x.gz: 2 bytes follow the end of the compressed data"), UserError);
}

TEST_CASE("zero bytes after the end of gzip data are dropped as gzip -d drops them, and others still refused") {
  const auto first = idx({4}, 4), second = std::vector<uint8_t>{9, 8, 7};
  auto padded = gzip(first);
  padded.resize(padded.size() + 512, 0);  // a block tool's padding
  CHECK(gunzip(padded, "x.gz") == first);
  auto both = gzip(first);
  const auto more = gzip(second);
  both.insert(both.end(), more.begin(), more.end());
  both.resize(both.size() + 3, 0);
  std::vector<uint8_t> want = first;
  want.insert(want.end(), second.begin(), second.end());
  CHECK(gunzip(both, "x.gz") == want);
  padded.push_back(5);
  CHECK_THROWS_WITH_AS(gunzip(padded, "x.gz"),
                       doctest::Contains("x.gz: 513 bytes follow the end of the compressed data (expected another gzip "
                                         "member, zero padding or nothing)"),
                       UserError);
}

TEST_CASE("gzip data over 4 GiB is read whole, not cut to its size modulo 4 GiB") {
  // A member and then zero padding to 4 GiB + 10 bytes: zlib's 32-bit count of input would
  // see 10 bytes of it. The 4 GiB are one 64 MiB file in memory mapped again and again (its
  // first copy holding the member, the others a second, zero part), each mapping filled in as
  // it is made: reading them takes no page faults and clears no memory.
  const auto raw = idx({10, 10}, 100);
  const auto gz = gzip(raw);
  REQUIRE(gz.size() > 10);
  const size_t size = (size_t(1) << 32) + 10, part = size_t(64) << 20, parts = (size + part - 1) / part;
  const int fd = ::memfd_create("big.gz", 0);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, off_t(2 * part)) == 0);
  REQUIRE(::pwrite(fd, gz.data(), gz.size(), 0) == ssize_t(gz.size()));
  auto* map = static_cast<uint8_t*>(
      ::mmap(nullptr, parts * part, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  REQUIRE(map != MAP_FAILED);
  for (size_t i = 0; i < parts; ++i)
    REQUIRE(::mmap(map + i * part, part, PROT_READ, MAP_SHARED | MAP_FIXED | MAP_POPULATE, fd, off_t(i == 0 ? 0 : part)) ==
            map + i * part);
  ::close(fd);
  CHECK(gunzip(std::span<const uint8_t>(map, size), "big.gz") == raw);
  ::munmap(map, parts * part);
}

TEST_CASE("a dataset folder without Fashion-MNIST is refused with the package to install") {
  CHECK_THROWS_WITH_AS(load_fashion_mnist("/nonexistent", true), doctest::Contains("install Debian's dataset-fashion-mnist"), UserError);
}

namespace {
std::filesystem::path scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("brigade-idx-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}
}  // namespace

TEST_CASE("uncompressed IDX files are read where the .gz ones are missing, and neither is named in full") {
  namespace fs = std::filesystem;
  const fs::path gz = scratch("gz"), plain = scratch("plain");
  test::write_tiny_fashion(gz, 20, 10);
  test::write_tiny_fashion(plain, 20, 10, false);
  REQUIRE(fs::exists(plain / "t10k-images-idx3-ubyte"));
  REQUIRE_FALSE(fs::exists(plain / "t10k-images-idx3-ubyte.gz"));
  for (bool train : {true, false}) {
    const ImageSet a = load_fashion_mnist(gz.string(), train), b = load_fashion_mnist(plain.string(), train);
    CHECK(b.count == (train ? 20u : 10u));
    CHECK(a.pixels == b.pixels);
    CHECK(a.labels == b.labels);
  }
  // One gzipped, one not: each file is found on its own.
  fs::rename(gz / "t10k-labels-idx1-ubyte.gz", plain / "t10k-labels-idx1-ubyte.gz");
  fs::remove(plain / "t10k-labels-idx1-ubyte");
  CHECK(load_fashion_mnist(plain.string(), false).count == 10);
  fs::remove(plain / "t10k-labels-idx1-ubyte.gz");
  CHECK_THROWS_WITH_AS(load_fashion_mnist(plain.string(), false),
                       doctest::Contains((plain.string() + "/t10k-labels-idx1-ubyte.gz: not found, nor t10k-labels-idx1-ubyte; "
                                          "install Debian's dataset-fashion-mnist").c_str()),
                       UserError);
  fs::remove_all(gz);
  fs::remove_all(plain);
}

TEST_CASE("a split of 0 images is refused naming its file") {
  const auto dir = scratch("empty");
  test::write_tiny_fashion(dir, 0, 0);
  CHECK_THROWS_WITH_AS(load_fashion_mnist(dir.string(), false),
                       doctest::Contains((dir.string() + "/t10k-images-idx3-ubyte.gz: holds 0 images; the test split needs at least one").c_str()),
                       UserError);
  test::write_tiny_fashion(dir, 0, 10);
  CHECK(load_fashion_mnist(dir.string(), false).count == 10);
  CHECK_THROWS_WITH_AS(load_fashion_mnist(dir.string(), true),
                       doctest::Contains((dir.string() + "/train-images-idx3-ubyte.gz: holds 0 images; the training split needs at least one").c_str()),
                       UserError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a Fashion-MNIST path that is a file is refused as not the folder it reads") {
  const auto dir = scratch("file");
  test::write_text(dir / "some.txt", "not a dataset\n");
  CHECK_THROWS_WITH_AS(load_fashion_mnist((dir / "some.txt").string(), true),
                       doctest::Contains(((dir / "some.txt").string() + ": is a file; a Fashion-MNIST model reads `data` DIR, "
                                          "a folder holding the dataset's four *-idx*-ubyte files (gzipped or not)").c_str()),
                       UserError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a dataset folder whose images are not 28x28 is refused naming their size") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "brigade-idx-32x32";
  std::filesystem::create_directories(dir);
  std::vector<uint8_t> images{0, 0, 8, 3}, labels{0, 0, 8, 1};
  test::put_be32(images, 2), test::put_be32(images, 32), test::put_be32(images, 32);
  images.resize(images.size() + 2 * 32 * 32, 7);
  test::put_be32(labels, 2);
  labels.insert(labels.end(), {1, 2});
  test::write_gz(dir / "t10k-images-idx3-ubyte.gz", images);
  test::write_gz(dir / "t10k-labels-idx1-ubyte.gz", labels);
  CHECK_THROWS_WITH_AS(load_fashion_mnist(dir.string(), false),
                       doctest::Contains("images of 32x32 pixels; expected Fashion-MNIST's 28x28"), UserError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("Fashion-MNIST loads with 60000 training and 10000 test images of 28x28") {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  REQUIRE_MESSAGE(std::filesystem::exists(dir), "install dataset-fashion-mnist (tools/install-deps.sh does)");
  const ImageSet test = load_fashion_mnist(dir, false);
  CHECK(test.count == 10000);
  CHECK(test.height == 28);
  CHECK(test.width == 28);
  CHECK(test.pixels.size() == 10000u * 28 * 28);
  std::vector<int> per_class(10, 0);
  for (int32_t l : test.labels) per_class[size_t(l)]++;
  for (int c : per_class) CHECK(c == 1000);  // the test split is balanced
  double mean = 0;
  for (uint8_t p : test.pixels) mean += p / 255.0;
  mean /= double(test.pixels.size());
  CHECK(mean > 0.25);  // Fashion-MNIST's mean pixel is about 0.286
  CHECK(mean < 0.32);
}

}  // namespace io_idx_test
