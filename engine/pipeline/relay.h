// The host side of a boundary transfer between two devices of a pipeline. Devices of
// different drivers cannot wait on each other's semaphores, so a relay thread waits on the
// host for the producer's queue timeline to pass a value, does the link's host step (a
// staging copy, or nothing for shared memory), then advances a counter the consumer's stage
// thread waits on before its next submission. Items run in the order they are pushed.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/abort.h"
#include "pipeline/counter.h"
#include "vk/clock.h"
#include "vk/device.h"

namespace brigade::pipeline {

using vk::now_us;  // host time in microseconds of the steady clock (vk/clock.h)
// CPU time the calling thread has run, in microseconds: what it did, without the time other
// threads held its core.
double thread_cpu_us();

// What a relay did, for the trace: host times in microseconds of the steady clock.
struct Transfer {
  std::string name;    // "sA3" ...
  uint64_t bytes = 0;  // bytes the host copied (0 on shared memory)
  uint64_t shared_bytes = 0;  // bytes the link carries
  double ready_us = 0, begin_us = 0, end_us = 0;  // pushed, producer done, consumer signalled
};

class Relay {
 public:
  struct Item {
    std::string name;
    vk::Device* producer = nullptr;  // wait for its queue timeline to reach `value`
    uint64_t value = 0;
    std::function<uint64_t()> work;  // the host step; returns bytes copied
    uint64_t shared_bytes = 0;
    Counter* signal = nullptr;       // then advance it to `signal_value`
    uint64_t signal_value = 0;
  };

  Relay(std::string name, Abort& abort);
  ~Relay();
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  void push(Item item);
  // Blocks until every pushed item has run (or the pipeline aborted).
  void drain();
  std::vector<Transfer> take_transfers();

 private:
  void loop();

  std::string name_;
  Abort& abort_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool busy_ = false, stop_ = false;
  std::vector<Transfer> transfers_;
  std::thread thread_;
};

}  // namespace brigade::pipeline
