#include "pipeline/buckets.h"

#include <map>

#include "vk/device.h"

namespace brigade::pipeline {

std::vector<Bucket> plan_buckets(const model::Model& model, uint32_t first, uint32_t last, uint64_t bytes) {
  // Each trainable parameter's first holder among the cell's layers.
  std::map<std::string, uint32_t> holder;
  for (uint32_t l = last; l-- > first;)
    for (const model::ParamSpec& p : model.layers[l]->params())
      if (p.kind == model::ParamKind::Trainable) holder[p.name] = l - first;
  std::vector<Bucket> buckets;
  Bucket open;
  uint64_t open_bytes = 0;
  for (uint32_t l = last; l-- > first;) {
    for (const model::ParamSpec& p : model.layers[l]->params())
      if (p.kind == model::ParamKind::Trainable && holder.at(p.name) == l - first) {
        open.names.push_back(p.name);
        open_bytes += p.elements() * sizeof(float);
      }
    if ((open_bytes >= bytes && !open.names.empty()) || l == first) {
      open.after = l - first;
      if (!open.names.empty()) buckets.push_back(std::move(open));
      open = {}, open_bytes = 0;
    }
  }
  return buckets;
}

BucketSums::BucketSums(Group& replicas) : replicas_(replicas), thread_([this] { loop(); }) {}

BucketSums::~BucketSums() {
  {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return todo_.empty(); });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void BucketSums::push(vk::Device& device, uint64_t value, std::vector<vk::Buffer*> buffers) {
  {
    std::lock_guard lock(mutex_);
    todo_.push_back({&device, value, std::move(buffers), {}});
  }
  cv_.notify_all();
}

void BucketSums::loop() {
  for (;;) {
    Job job;
    bool ok = true;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || !todo_.empty(); });
      if (todo_.empty()) return;
      job = std::move(todo_.front());
      ok = !failed_;  // after a failure the rest are not summed
    }
    if (ok) {
      try {
        job.device->wait(job.value);
        for (const vk::Buffer* b : job.buffers) {
          const size_t at = job.sums.size();
          job.sums.resize(at + b->size() / sizeof(float));
          vk::download(*b, job.sums.data() + at, b->size());
        }
        ok = replicas_.sum(job.sums);
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
        ok = false;
      }
    }
    {
      std::lock_guard lock(mutex_);
      failed_ = failed_ || !ok;
      done_.push_back(std::move(job));
      todo_.pop_front();
    }
    cv_.notify_all();
  }
}

bool BucketSums::finish() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return todo_.empty(); });
  if (error_) std::rethrow_exception(error_);
  if (failed_) return false;
  for (Job& job : done_) {
    uint64_t at = 0;
    for (vk::Buffer* b : job.buffers) vk::upload(*b, job.sums.data() + at, b->size()), at += b->size() / sizeof(float);
  }
  done_.clear();
  return true;
}

}  // namespace brigade::pipeline
