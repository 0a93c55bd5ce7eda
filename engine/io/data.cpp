#include "io/data.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <utility>

#include "io/checksum.h"
#include "io/files.h"
#include "pipeline/plan.h"
#include "util/error.h"

namespace brigade::io {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  uint64_t z = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t order_key(uint64_t seed, uint64_t a, uint64_t b) {
  return splitmix64(splitmix64(splitmix64(seed) ^ a) ^ b);
}

std::vector<uint32_t> shuffled(uint32_t n, uint64_t seed, uint64_t epoch) {
  std::vector<uint32_t> p(n);
  for (uint32_t i = 0; i < n; ++i) p[i] = i;
  for (uint32_t i = n; i-- > 1;) std::swap(p[i], p[order_key(seed, epoch, i) % (uint64_t(i) + 1)]);
  return p;
}

namespace {

void expect_rows(uint32_t rows) {
  if (rows == 0) throw UserError("a batch of 0 samples: the batch size must be at least 1");
}

// `count` samples in chunks of at most `rows`, sizes differing by at most one.
std::vector<std::pair<uint64_t, uint32_t>> chunks(uint64_t count, uint32_t rows, uint32_t limit) {
  expect_rows(rows);
  uint64_t n = (count + rows - 1) / rows;
  std::vector<std::pair<uint64_t, uint32_t>> out;
  if (n == 0) return out;
  uint64_t first = 0;
  for (uint32_t size : pipeline::split_rows(uint32_t(count), uint32_t(n))) {
    if (limit && out.size() == limit) break;
    out.push_back({first, size});
    first += size;
  }
  return out;
}

class FashionMnist final : public Dataset {
 public:
  FashionMnist(const std::string& dir, uint64_t seed)
      : dir_(dir), seed_(seed), test_(load_fashion_mnist(dir, false)) {}

  std::string describe() const override {
    return "Fashion-MNIST from " + dir_ + ": " + std::to_string(train().count) + " training and " +
           std::to_string(test_.count) + " test images";
  }
  uint64_t steps_per_epoch(uint32_t rows) const override {
    expect_rows(rows);
    if (rows > train().count)
      throw UserError("a batch of " + std::to_string(rows) + " is larger than the training set (" +
                      std::to_string(train().count) + " images)");
    return train().count / rows;
  }
  pipeline::Batch train_batch(uint64_t step, uint32_t rows) override {
    const uint64_t per_epoch = steps_per_epoch(rows), epoch = step / per_epoch;
    if (epoch != order_epoch_ || order_.empty()) order_ = shuffled(train().count, seed_, epoch), order_epoch_ = epoch;
    const uint64_t first = (step % per_epoch) * rows;
    return gather(train(), std::span<const uint32_t>(order_).subspan(first, rows));
  }
  std::vector<pipeline::Batch> eval_batches(uint32_t rows, uint32_t limit) const override {
    std::vector<uint32_t> all(test_.count);
    for (uint32_t i = 0; i < test_.count; ++i) all[i] = i;
    std::vector<pipeline::Batch> out;
    for (auto [first, size] : chunks(test_.count, rows, limit))
      out.push_back(gather(test_, std::span<const uint32_t>(all).subspan(first, size)));
    return out;
  }
  const char* eval_split() const override { return "test"; }
  const char* unit() const override { return "samples"; }
  std::string checksum() const override {
    std::string sum;
    for (const ImageSet* set : {&train(), &test_}) {
      sum = io::checksum(set->pixels, sum);
      sum = io::checksum(std::span(reinterpret_cast<const uint8_t*>(set->labels.data()), set->labels.size() * 4), sum);
    }
    return sum;
  }

 private:
  // The training split, read when first asked for: `eval` takes the test split alone, and
  // the training images are most of the dataset's gunzipping.
  const ImageSet& train() const {
    if (!train_) train_ = load_fashion_mnist(dir_, true);
    return *train_;
  }
  static pipeline::Batch gather(const ImageSet& set, std::span<const uint32_t> indices) {
    const uint64_t px = uint64_t(set.height) * set.width;
    pipeline::Batch b;
    b.rows = uint32_t(indices.size());
    b.images.resize(b.rows * px);
    b.targets.resize(b.rows);
    for (uint32_t r = 0; r < b.rows; ++r) {
      const uint8_t* from = set.pixels.data() + indices[r] * px;
      float* to = b.images.data() + r * px;
      for (uint64_t i = 0; i < px; ++i) to[i] = float(from[i]) / 255.0f;
      b.targets[r] = set.labels[indices[r]];
    }
    return b;
  }

  std::string dir_;
  uint64_t seed_;
  mutable std::optional<ImageSet> train_;
  ImageSet test_;
  std::vector<uint32_t> order_;
  uint64_t order_epoch_ = 0;
};

// The bytes of a text of `size` bytes that form its validation split, its tail.
size_t validation_bytes(size_t size, double val_fraction) { return size_t(double(size) * val_fraction); }

class TextBytes final : public Dataset {
 public:
  TextBytes(const std::string& path, uint32_t block, double val_fraction, uint64_t seed)
      : path_(path), block_(block), seed_(seed) {
    if (!(val_fraction > 0 && val_fraction < 1))
      throw UserError("the validation fraction must be between 0 and 1, not " + std::to_string(val_fraction));
    if (block == 0) throw UserError(path + ": text windows need at least 1 token, not 0");
    std::vector<uint8_t> all = read_bytes(path);
    const size_t val = validation_bytes(all.size(), val_fraction);
    const size_t train = all.size() - val;
    if (train < size_t(block) + 2 || val < size_t(block) + 1) {
      // The shortest file with a window in each split (a window of T tokens reads T + 1 bytes;
      // training draws from at least two window positions).
      const double T = block;
      size_t need = size_t(std::max({2 * T + 3, (T + 1) / val_fraction, (T + 1) / (1 - val_fraction)}));
      need = need > 2 ? need - 2 : 0;
      while (need - validation_bytes(need, val_fraction) < size_t(block) + 2 ||
             validation_bytes(need, val_fraction) < size_t(block) + 1)
        ++need;
      char share[32];
      std::snprintf(share, sizeof share, "%g%%", val_fraction * 100);
      throw UserError(path + ": " + (all.empty() ? std::string("the file is empty") :
                      "only " + std::to_string(all.size()) + " bytes") + "; " + std::to_string(block) +
                      "-token windows in both the training and the validation split (its last " + share +
                      ") need at least " + std::to_string(need) + " bytes");
    }
    train_.assign(all.begin(), all.begin() + train);
    val_.assign(all.begin() + train, all.end());
  }

  std::string describe() const override {
    return path_ + ": " + std::to_string(train_.size()) + " training and " + std::to_string(val_.size()) +
           " validation bytes, " + std::to_string(block_) + "-token windows";
  }
  uint64_t steps_per_epoch(uint32_t rows) const override {
    expect_rows(rows);
    return std::max<uint64_t>(1, train_.size() / (uint64_t(rows) * block_));
  }
  pipeline::Batch train_batch(uint64_t step, uint32_t rows) override {
    pipeline::Batch b;
    b.rows = rows;
    const uint64_t span = train_.size() - block_;
    for (uint32_t r = 0; r < rows; ++r) window(train_, order_key(seed_, step, r) % span, b);
    return b;
  }
  std::vector<pipeline::Batch> eval_batches(uint32_t rows, uint32_t limit) const override {
    std::vector<pipeline::Batch> out;
    for (auto [first, size] : chunks((val_.size() - 1) / block_, rows, limit)) {
      pipeline::Batch b;
      b.rows = size;
      for (uint32_t r = 0; r < size; ++r) window(val_, (first + r) * block_, b);
      out.push_back(std::move(b));
    }
    return out;
  }
  const char* eval_split() const override { return "val"; }
  const char* unit() const override { return "tokens"; }
  std::string checksum() const override { return io::checksum(val_, io::checksum(train_)); }

 private:
  void window(const std::vector<uint8_t>& text, uint64_t o, pipeline::Batch& b) const {
    for (uint32_t t = 0; t < block_; ++t) {
      b.tokens.push_back(text[o + t]);
      b.targets.push_back(text[o + t + 1]);
    }
  }

  std::string path_;
  uint32_t block_;
  uint64_t seed_;
  std::vector<uint8_t> train_, val_;
};

}  // namespace

std::unique_ptr<Dataset> fashion_mnist(const std::string& dir, uint64_t seed) {
  return std::make_unique<FashionMnist>(dir, seed);
}

std::unique_ptr<Dataset> text_bytes(const std::string& path, uint32_t block, double val_fraction,
                                    uint64_t seed) {
  return std::make_unique<TextBytes>(path, block, val_fraction, seed);
}

std::unique_ptr<Dataset> open_dataset(const model::Model& m, const std::string& path, uint64_t seed) {
  if (m.token_input) {
    if (m.classes != 256 || m.input.size() != 1)
      throw UserError(m.name + ": text data is bytes, so a token model needs vocab_size 256 (it has " +
                      std::to_string(m.classes) + ")");
    return text_bytes(path.empty() ? kJargonFile : path, uint32_t(m.input[0]), 0.1, seed);
  }
  if (m.input != model::Shape{1, 28, 28} || m.classes != 10)
    throw UserError(m.name + ": Fashion-MNIST needs input [1, 28, 28] and 10 classes; the model takes " +
                    model::to_string(m.input) + " and " + std::to_string(m.classes) + " classes");
  return fashion_mnist(path.empty() ? kFashionMnistDir : path, seed);
}

}  // namespace brigade::io
