// Training data: Fashion-MNIST images and text as bytes, cut into mini-batches in an order
// that is a pure function of (seed, step). Nothing about the order is kept between steps,
// so a run resumed at step k reads exactly the batches the uninterrupted run would have.
//
// The order, precisely (so another program can reproduce it):
//   splitmix64(x): x += 0x9e3779b97f4a7c15; z = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9;
//                  z = (z ^ (z >> 27)) * 0x94d049bb133111eb; return z ^ (z >> 31)
//   key(seed, a, b) = splitmix64(splitmix64(splitmix64(seed) ^ a) ^ b)   (mod 2^64)
//   images: epoch e visits the training set in the order of a Fisher-Yates shuffle of
//     0..n-1: for i = n-1 down to 1, swap(p[i], p[key(seed, e, i) % (i + 1)]); step s of
//     an epoch takes p[s*N .. s*N+N); the last partial batch of an epoch is dropped.
//   text: row r of step s is the window at o = key(seed, s, r) % (len(train) - T):
//     input bytes train[o .. o+T), targets train[o+1 .. o+T+1).
// Evaluation reads the test split (images) or the validation split (text: consecutive
// non-overlapping windows from its start), in order.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/idx.h"
#include "model/model.h"
#include "pipeline/batch.h"

namespace brigade::io {

uint64_t splitmix64(uint64_t x);
uint64_t order_key(uint64_t seed, uint64_t a, uint64_t b);
// The Fisher-Yates permutation of 0..n-1 for epoch `epoch`.
std::vector<uint32_t> shuffled(uint32_t n, uint64_t seed, uint64_t epoch);

// The batches a training run reads.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::string describe() const = 0;  // one line: what, where, how much
  virtual uint64_t steps_per_epoch(uint32_t rows) const = 0;
  virtual pipeline::Batch train_batch(uint64_t step, uint32_t rows) = 0;
  // The evaluation split in chunks of at most `rows` samples (at most `limit` chunks when
  // limit > 0). The chunks differ in size by at most one row.
  virtual std::vector<pipeline::Batch> eval_batches(uint32_t rows, uint32_t limit) const = 0;
  virtual const char* eval_split() const = 0;  // "test" | "val"
  virtual const char* unit() const = 0;        // "samples" | "tokens": what throughput counts
  // The CRC-32 (io/checksum.h) of the training and evaluation data as read: a resumed run or
  // another rank tells by it whether it reads the data the run started on.
  virtual std::string checksum() const = 0;
};

// Fashion-MNIST from `dir` (its four IDX .gz files), shuffled by `seed`.
std::unique_ptr<Dataset> fashion_mnist(const std::string& dir, uint64_t seed);
// A text file as bytes (gunzipped if gzip): the last `val_fraction` of it is the validation
// split. Windows of `block` tokens; refuses files too short for a window in either split.
std::unique_ptr<Dataset> text_bytes(const std::string& path, uint32_t block, double val_fraction,
                                    uint64_t seed);
// The dataset a model trains on: Fashion-MNIST for [1, 28, 28] images of 10 classes, text
// for byte-token models; `path` empty means the default location.
std::unique_ptr<Dataset> open_dataset(const model::Model& m, const std::string& path, uint64_t seed);

constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
constexpr const char* kJargonFile = "/usr/share/doc/jargon-text/jargon.txt.gz";

}  // namespace brigade::io
