// The data order is a pure, documented function of (seed, step): checked against splitmix64's
// published first output, for permutations, and for the text windows and splits.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "io/data.h"
#include "io/files.h"
#include "tiny_data.h"
#include "util/error.h"

namespace io_data_test {

using namespace brigade;

TEST_CASE("splitmix64 and the order key are the published generator") {
  CHECK(io::splitmix64(0) == 0xe220a8397b1dcdafull);  // SplitMix64's first output from state 0
  CHECK(io::order_key(1, 2, 3) == io::splitmix64(io::splitmix64(io::splitmix64(1) ^ 2) ^ 3));
  CHECK(io::order_key(1, 2, 3) != io::order_key(1, 3, 2));
}

TEST_CASE("an epoch's shuffle is a permutation that depends on seed and epoch only") {
  const auto p = io::shuffled(1000, 7, 0);
  std::vector<uint32_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t i = 0; i < 1000; ++i) REQUIRE(sorted[i] == i);
  CHECK(io::shuffled(1000, 7, 0) == p);
  CHECK(io::shuffled(1000, 7, 1) != p);
  CHECK(io::shuffled(1000, 8, 0) != p);
}

TEST_CASE("Fashion-MNIST batches visit every training image once per epoch, dropping the partial batch") {
  const auto dir = std::filesystem::temp_directory_path() / ("brigade-data-" + std::to_string(getpid()));
  test::write_tiny_fashion(dir, 50, 23);
  auto data = io::fashion_mnist(dir.string(), 3);
  CHECK(data->steps_per_epoch(8) == 6);
  std::multiset<int32_t> labels;
  std::set<std::vector<float>> seen;
  for (uint64_t s = 0; s < 6; ++s) {
    const pipeline::Batch b = data->train_batch(s, 8);
    REQUIRE(b.rows == 8);
    REQUIRE(b.images.size() == 8 * 784);
    for (uint32_t r = 0; r < 8; ++r)
      seen.insert(std::vector<float>(b.images.begin() + r * 784, b.images.begin() + (r + 1) * 784));
  }
  CHECK(seen.size() == 48);  // distinct images: none twice within the epoch
  CHECK(data->train_batch(6, 8).images != data->train_batch(0, 8).images);  // epoch 1 reshuffles
  CHECK(data->train_batch(2, 8).images == io::fashion_mnist(dir.string(), 3)->train_batch(2, 8).images);
  const auto eval = data->eval_batches(8, 0);
  REQUIRE(eval.size() == 3);  // 23 images: 8, 8, 7
  CHECK(eval[0].rows == 8);
  CHECK(eval[2].rows == 7);
  CHECK(data->eval_batches(8, 2).size() == 2);
  CHECK_THROWS_AS(io::fashion_mnist((dir / "missing").string(), 0), UserError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("text windows: targets are the next bytes, the validation split is the file's tail") {
  const auto path = std::filesystem::temp_directory_path() / ("brigade-text-" + std::to_string(getpid()));
  std::string text;
  for (int i = 0; i < 1000; ++i) text += char('a' + (i * 7) % 26);
  test::write_text(path, text);
  auto data = io::text_bytes(path.string(), 16, 0.1, 9);
  const pipeline::Batch b = data->train_batch(4, 3);
  REQUIRE(b.tokens.size() == 48);
  REQUIRE(b.targets.size() == 48);
  for (uint32_t r = 0; r < 3; ++r) {
    const uint64_t o = io::order_key(9, 4, r) % (900 - 16);
    for (uint32_t t = 0; t < 16; ++t) {
      CHECK(b.tokens[r * 16 + t] == uint8_t(text[o + t]));
      CHECK(b.targets[r * 16 + t] == uint8_t(text[o + t + 1]));
    }
  }
  const auto eval = data->eval_batches(2, 0);  // (100 - 1) / 16 = 6 windows from byte 900
  REQUIRE(eval.size() == 3);
  CHECK(eval[1].tokens[0] == uint8_t(text[900 + 2 * 16]));
  CHECK(eval[1].targets[15] == uint8_t(text[900 + 3 * 16]));
  CHECK_THROWS_AS(io::text_bytes(path.string(), 128, 0.1, 0), UserError);  // 100 bytes of validation
  std::filesystem::remove(path);
}

// What the whole-file reader refuses: a folder, and a device with no end to read to (where
// /dev/zero grew until memory ran out); a missing file names the reason.
TEST_CASE("read_file refuses a folder, a device and a missing file, naming each") {
  CHECK_THROWS_WITH_AS(io::read_file("/tmp"), "/tmp: is a folder; expected a file", UserError);
  CHECK_THROWS_WITH_AS(io::read_file("/dev/zero"), "/dev/zero: is a device, not a file", UserError);
  CHECK_THROWS_WITH_AS(io::read_file("/nonexistent/x"), "/nonexistent/x: cannot open (No such file or directory)", UserError);
}

TEST_CASE("a batch size of 0 is refused, not divided by") {
  const auto path = std::filesystem::temp_directory_path() / ("brigade-zero-" + std::to_string(getpid()));
  test::write_text(path, std::string(1000, 'x'));
  auto data = io::text_bytes(path.string(), 16, 0.1, 0);
  CHECK_THROWS_WITH_AS(data->steps_per_epoch(0), doctest::Contains("the batch size must be at least 1"), UserError);
  CHECK_THROWS_WITH_AS(data->eval_batches(0, 0), doctest::Contains("the batch size must be at least 1"), UserError);
  std::filesystem::remove(path);
  const auto dir = std::filesystem::temp_directory_path() / ("brigade-zero-fashion-" + std::to_string(getpid()));
  test::write_tiny_fashion(dir, 20, 10);
  auto images = io::fashion_mnist(dir.string(), 0);
  CHECK_THROWS_WITH_AS(images->steps_per_epoch(0), doctest::Contains("the batch size must be at least 1"), UserError);
  CHECK_THROWS_WITH_AS(images->eval_batches(0, 0), doctest::Contains("the batch size must be at least 1"), UserError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("an empty or too short text file is refused with the size it needs") {
  const auto path = std::filesystem::temp_directory_path() / ("brigade-short-" + std::to_string(getpid()));
  test::write_text(path, "");
  const std::string empty = path.string() + ": the file is empty; 128-token windows in both the training and "
                            "the validation split (its last 10%) need at least 1290 bytes";
  CHECK_THROWS_WITH_AS(io::text_bytes(path.string(), 128, 0.1, 0), doctest::Contains(empty.c_str()), UserError);
  test::write_text(path, std::string(1289, 'x'));
  CHECK_THROWS_WITH_AS(io::text_bytes(path.string(), 128, 0.1, 0),
                       doctest::Contains(": only 1289 bytes; 128-token windows"), UserError);
  test::write_text(path, std::string(1290, 'x'));
  CHECK(io::text_bytes(path.string(), 128, 0.1, 0)->eval_batches(1, 0).size() == 1);
  // Short of the training split rather than the validation one.
  test::write_text(path, std::string(10, 'x'));
  CHECK_THROWS_WITH_AS(io::text_bytes(path.string(), 4, 0.5, 0), doctest::Contains("need at least 11 bytes"), UserError);
  test::write_text(path, std::string(11, 'x'));
  CHECK(io::text_bytes(path.string(), 4, 0.5, 0)->steps_per_epoch(1) == 1);
  std::filesystem::remove(path);
}

}  // namespace io_data_test
