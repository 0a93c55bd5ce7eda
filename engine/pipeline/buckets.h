// The replicas' gradient sum overlapped with the backward, in buckets (as PyTorch's DDP does
// it). A cell's last backward of the step is submitted in pieces, each ending after a group
// of layers whose gradients are then complete; a thread of the stage downloads each group's
// gradients once its piece has run and sums them over the replicas (Group::sum, member
// order), while the device runs the next piece. The Step then uploads the sums. Every element
// is the same sum in the same order as one sum after the backward: the same bits.
//
// On a device whose gradients are not host-visible (a discrete GPU), a download is a copy
// queued behind the pieces already submitted, so there the sum overlaps less.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "model/model.h"
#include "pipeline/group.h"
#include "vk/buffer.h"

namespace brigade::pipeline {

// One bucket: cut the backward after the cell's layer `after` (an index in the cell, the
// backward walking from the last), then sum `names`.
struct Bucket {
  uint32_t after = 0;
  std::vector<std::string> names;
};

// The buckets of the cell holding layers [first, last) of `model`: layers walked from the
// last, a bucket closed once its gradients reach `bytes` (and at the cell's first layer). A
// parameter several layers of the cell hold (tied) goes with the first of them, whose
// backward is the last to add to its gradient. Layers without trainable parameters join the
// next bucket.
std::vector<Bucket> plan_buckets(const model::Model& model, uint32_t first, uint32_t last, uint64_t bytes);

// The thread that sums the buckets of one stage thread's backward.
class BucketSums {
 public:
  explicit BucketSums(Group& replicas);
  ~BucketSums();  // waits for the buckets pushed so far
  BucketSums(const BucketSums&) = delete;
  BucketSums& operator=(const BucketSums&) = delete;

  // The gradients in `buffers` are complete once `device`'s queue reaches `value`.
  void push(vk::Device& device, uint64_t value, std::vector<vk::Buffer*> buffers);
  // Waits for every bucket pushed and uploads the sums into their gradients. False when a
  // sum failed (a member left); rethrows what failed on the thread (a lost device).
  bool finish();

 private:
  struct Job {
    vk::Device* device = nullptr;
    uint64_t value = 0;
    std::vector<vk::Buffer*> buffers;
    std::vector<float> sums;
  };
  void loop();

  Group& replicas_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Job> todo_;
  std::vector<Job> done_;
  bool stop_ = false, failed_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace brigade::pipeline
