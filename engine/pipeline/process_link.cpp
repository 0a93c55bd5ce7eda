#include "pipeline/process_link.h"

namespace brigade::pipeline {

ProcessLink::ProcessLink(vk::Device& producer, vk::Device& consumer, uint64_t bytes, uint32_t slots,
                         LinkKind kind, const std::string& name, Abort& abort)
    : memory_(producer, consumer, bytes, slots, kind, name),
      carry_(std::make_unique<Relay>(name + " relay", abort)),
      free_(std::make_unique<Relay>(name + " free relay", abort)) {}

ProcessLink::~ProcessLink() {
  // The relays finish before the memory and counters they use go away.
  carry_.reset();
  free_.reset();
}

bool ProcessLink::wait_free(uint64_t n, const StopFn& stop) {
  const uint64_t S = memory_.slots();
  return n < S || freed_.wait(n - S + 1, stop);
}

void ProcessLink::post(uint64_t n, vk::Device& producer, uint64_t value, std::string label) {
  LinkMemory* memory = &memory_;
  const uint32_t s = slot(n);
  carry_->push({std::move(label), &producer, value, [memory, s] { return memory->relay(s); },
                memory_.bytes(), &arrived_, n + 1});
}

void ProcessLink::release(uint64_t n, vk::Device& consumer, uint64_t value) {
  free_->push({"free", &consumer, value, {}, 0, &freed_, n + 1});
}

void ProcessLink::drain() {
  carry_->drain();
  free_->drain();
}

std::vector<Transfer> ProcessLink::take_transfers() {
  free_->take_transfers();
  return carry_->take_transfers();
}

void ProcessLink::interrupt() {
  arrived_.advance(UINT64_MAX);
  freed_.advance(UINT64_MAX);
}

}  // namespace brigade::pipeline
