#include "pipeline/relay.h"

#include <chrono>
#include <ctime>

namespace brigade::pipeline {

double thread_cpu_us() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e6 + double(t.tv_nsec) / 1e3;
}

namespace {

constexpr uint64_t kPollNs = 20'000'000;  // how often a waiting relay looks at the abort flag

}  // namespace

Relay::Relay(std::string name, Abort& abort)
    : name_(std::move(name)), abort_(abort), thread_([this] { loop(); }) {}

Relay::~Relay() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Relay::push(Item item) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(item));
  }
  cv_.notify_all();
}

void Relay::drain() {
  std::unique_lock lock(mutex_);
  // Polls the abort flag: an aborting pipeline does not notify every relay.
  while (!cv_.wait_for(lock, std::chrono::milliseconds(20),
                       [&] { return (queue_.empty() && !busy_) || abort_.raised(); })) {
  }
}

std::vector<Transfer> Relay::take_transfers() {
  std::lock_guard lock(mutex_);
  return std::move(transfers_);
}

void Relay::loop() {
  for (;;) {
    Item item;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      item = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    Transfer t;
    t.name = item.name;
    t.shared_bytes = item.shared_bytes;
    t.ready_us = now_us();
    try {
      bool done = false;
      while (!done && !abort_.raised()) done = item.producer->wait_for(item.value, kPollNs);
      if (done) {
        t.begin_us = now_us();
        if (item.work) t.bytes = item.work();
        item.signal->advance(item.signal_value);
        t.end_us = now_us();
      }
    } catch (...) {
      abort_.raise(std::current_exception());
    }
    {
      std::lock_guard lock(mutex_);
      if (t.end_us > 0) transfers_.push_back(std::move(t));
      busy_ = false;
    }
    cv_.notify_all();
  }
}

}  // namespace brigade::pipeline
