#include "mpi/mpi_link.h"

#include <climits>

#include "pipeline/relay.h"
#include "util/error.h"

namespace brigade::mpi {

namespace {

int tag_upper_bound(MPI_Comm comm) {
  void* ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(comm, MPI_TAG_UB, &ub, &flag);
  return flag ? *static_cast<int*>(ub) : 32767;  // the least MPI promises
}

}  // namespace

uint32_t max_link_boundaries(MPI_Comm comm, uint32_t slots) {
  return uint32_t(tag_upper_bound(comm) / (2 * (4 * int64_t(slots) + 1)));
}

MpiLink::MpiLink(Courier& courier, const pipeline::RemoteEnd& end, int peer)
    : courier_(courier), end_(end), peer_(peer), bytes_(end.bytes) {
  if (bytes_ > uint64_t(INT_MAX))
    throw UserError(end.name + ": " + std::to_string(bytes_) + " bytes per micro-batch, over the " +
                    std::to_string(INT_MAX) + " one message between processes can hold; use more micro-batches");
  for (uint32_t s = 0; s < end.slots; ++s)
    slots_.emplace_back(*end.device, bytes_, vk::Category::Transfer,
                        end.name + " slot " + std::to_string(s) + (end.producer ? " (send)" : " (receive)"),
                        vk::Residency::Host);
  window_ = tag_upper_bound(courier.comm()) / int(2 * end.boundaries);
  BRIGADE_EXPECT(window_ > int(4 * end.slots), "MPI tags for every transfer in flight");
  if (!end.producer)
    for (uint64_t n = 0; n < slots_.size(); ++n) expect(n, nullptr, 0);
}

MpiLink::~MpiLink() {
  if (interrupted_) return;
  courier_.drain();         // nothing of this link's still waits on a device
  courier_.cancel(this);    // nor a receive posted into its slots
}

int MpiLink::tag(uint64_t n) const {
  return int(n % uint64_t(window_)) * int(2 * end_.boundaries) + int(2 * end_.boundary + (end_.gradient ? 1 : 0));
}

void MpiLink::complete(pipeline::Counter& counter, std::set<uint64_t>& done, uint64_t& next, uint64_t n) {
  std::lock_guard lock(mutex_);
  done.insert(n);
  while (!done.empty() && *done.begin() == next) done.erase(done.begin()), ++next;
  counter.advance(next);
}

bool MpiLink::wait_free(uint64_t n, const pipeline::StopFn& stop) {
  const uint64_t S = slots_.size();
  if (n < S || freed_.value() >= n - S + 1) return true;
  Courier::Urgent urgent(courier_, end_.device);
  return freed_.wait(n - S + 1, stop);
}

bool MpiLink::wait_arrived(uint64_t n, const pipeline::StopFn& stop) {
  if (arrived_.value() >= n + 1) return true;
  Courier::Urgent urgent(courier_, end_.device);
  return arrived_.wait(n + 1, stop);
}

void MpiLink::post(uint64_t n, vk::Device& producer, uint64_t value, std::string label) {
  auto t = std::make_shared<pipeline::Transfer>();
  t->name = std::move(label), t->bytes = t->shared_bytes = bytes_, t->ready_us = pipeline::now_us();
  courier_.push({true, &producer, value, send(n).mapped(), bytes_, peer_, tag(n),
                 [t] { t->begin_us = pipeline::now_us(); },
                 [this, t, n] {
                   t->end_us = pipeline::now_us();
                   {
                     std::lock_guard lock(mutex_);
                     transfers_.push_back(*t);
                   }
                   complete(freed_, freed_set_, freed_next_, n);
                 }});
}

void MpiLink::expect(uint64_t n, vk::Device* gate, uint64_t value) {
  courier_.push({false, gate, value, receive(n).mapped(), bytes_, peer_, tag(n), {},
                 [this, n] { complete(arrived_, arrived_set_, arrived_next_, n); }, this});
}

void MpiLink::release(uint64_t n, vk::Device& consumer, uint64_t value) {
  expect(n + slots_.size(), &consumer, value);
}

std::vector<pipeline::Transfer> MpiLink::take_transfers() {
  std::lock_guard lock(mutex_);
  return std::move(transfers_);
}

void MpiLink::interrupt() {
  interrupted_ = true;
  courier_.halt();  // before this link's slots can be freed
  arrived_.advance(UINT64_MAX);
  freed_.advance(UINT64_MAX);
}

}  // namespace brigade::mpi
