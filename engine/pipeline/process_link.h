// A Link between two cells of one process: memory both devices see (LinkMemory, on the path
// choose_link picked), and two relay threads that pass each transfer's completion from one
// device's queue to the other's stage thread: one when a transfer is written (after the
// staging copy, if any), one when its slot was read and is free again.
#pragma once

#include <memory>

#include "pipeline/abort.h"
#include "pipeline/counter.h"
#include "pipeline/link.h"
#include "pipeline/relay.h"

namespace brigade::pipeline {

class ProcessLink final : public Link {
 public:
  ProcessLink(vk::Device& producer, vk::Device& consumer, uint64_t bytes, uint32_t slots,
              LinkKind kind, const std::string& name, Abort& abort);
  ~ProcessLink() override;

  LinkKind kind() const { return memory_.kind(); }
  uint64_t bytes() const override { return memory_.bytes(); }
  uint32_t slots() const override { return memory_.slots(); }
  vk::Buffer& send(uint64_t n) override { return memory_.send(slot(n)); }
  bool wait_free(uint64_t n, const StopFn& stop) override;
  void post(uint64_t n, vk::Device& producer, uint64_t value, std::string label) override;
  bool wait_arrived(uint64_t n, const StopFn& stop) override { return arrived_.wait(n + 1, stop); }
  vk::Buffer& receive(uint64_t n) override { return memory_.receive(slot(n)); }
  void release(uint64_t n, vk::Device& consumer, uint64_t value) override;
  void drain() override;
  std::vector<Transfer> take_transfers() override;
  void interrupt() override;

 private:
  uint32_t slot(uint64_t n) const { return uint32_t(n % memory_.slots()); }

  LinkMemory memory_;
  Counter arrived_, freed_;  // transfer sequence numbers + 1
  std::unique_ptr<Relay> carry_, free_;
};

}  // namespace brigade::pipeline
