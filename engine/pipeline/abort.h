// How the threads of one pipeline stop together: the first failure is kept, every thread
// sees the flag at its next wait, and the hooks unblock device queues waiting on timelines
// that will now never be signalled.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <mutex>
#include <vector>

namespace brigade::pipeline {

class Abort {
 public:
  bool raised() const { return raised_.load(std::memory_order_acquire); }
  // Keeps the first exception and runs the hooks once.
  void raise(std::exception_ptr e);
  void on_raise(std::function<void()> hook);
  // Rethrows the first failure, if any.
  void rethrow() const;
  void reset();

 private:
  std::atomic<bool> raised_{false};
  mutable std::mutex mutex_;
  std::exception_ptr first_;
  std::vector<std::function<void()>> hooks_;
};

}  // namespace brigade::pipeline
