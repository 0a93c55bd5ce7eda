// A monotonic counter one host thread advances and others wait on: how a relay tells a
// stage's thread that a boundary tensor arrived or a link slot is free again. (Host threads
// talk through host primitives; Vulkan semaphores order the devices' queues.)
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace brigade::pipeline {

class Counter {
 public:
  // Raises the value to at least v and wakes the waiters.
  void advance(uint64_t v) {
    {
      std::lock_guard lock(mutex_);
      if (v > value_) value_ = v;
    }
    cv_.notify_all();
  }
  // Blocks until the value reaches v or `stop()` returns true (checked every few ms).
  template <class Stop>
  bool wait(uint64_t v, Stop stop) {
    std::unique_lock lock(mutex_);
    while (value_ < v) {
      if (stop()) return false;
      cv_.wait_for(lock, std::chrono::milliseconds(10));
    }
    return true;
  }
  uint64_t value() const {
    std::lock_guard lock(mutex_);
    return value_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  uint64_t value_ = 0;
};

}  // namespace brigade::pipeline
