#include "pipeline/abort.h"

namespace brigade::pipeline {

void Abort::raise(std::exception_ptr e) {
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard lock(mutex_);
    if (first_) return;
    first_ = e;
    raised_.store(true, std::memory_order_release);
    hooks = hooks_;
  }
  for (auto& h : hooks) {
    try {
      h();
    } catch (...) {  // unblocking is best effort; the first failure is what gets reported
    }
  }
}

void Abort::on_raise(std::function<void()> hook) {
  std::lock_guard lock(mutex_);
  hooks_.push_back(std::move(hook));
}

void Abort::rethrow() const {
  std::lock_guard lock(mutex_);
  if (first_) std::rethrow_exception(first_);
}

void Abort::reset() {
  std::lock_guard lock(mutex_);
  first_ = nullptr;
  raised_.store(false, std::memory_order_release);
}

}  // namespace brigade::pipeline
