// One side of a Link whose cells run in two processes: S host-visible slots on this side's
// device, and the Courier moving each transfer as one MPI message. The producer's side
// sends slot n % S once the producer's copy into it has completed, and the slot is free
// again when the send has. The consumer's side keeps a receive posted in every slot that
// is free (from the start, and again once the last reader of a slot's transfer has
// completed), so the message lands while the consumer computes; a transfer has arrived
// when its receive completes. Tags are unique per boundary, direction and transfer number
// (which runs on across steps and evaluations) within a window far wider than the slots
// in flight.
#pragma once

#include <atomic>
#include <mutex>
#include <set>

#include "mpi/courier.h"
#include "pipeline/counter.h"
#include "pipeline/link.h"
#include "pipeline/topology.h"

namespace brigade::mpi {

// The most boundaries whose transfers the tags of `comm` tell apart, with `slots` transfers in
// flight per link: each boundary and direction takes every (2 x boundaries)-th tag, and a
// link needs a window of more than 4 x slots transfer numbers.
uint32_t max_link_boundaries(MPI_Comm comm, uint32_t slots);

class MpiLink final : public pipeline::Link {
 public:
  // `peer`: the other side's rank in the courier's communicator. The pipeline's boundaries
  // (end.boundaries) must be at most max_link_boundaries(comm, end.slots).
  MpiLink(Courier& courier, const pipeline::RemoteEnd& end, int peer);
  ~MpiLink() override;

  uint64_t bytes() const override { return bytes_; }
  uint32_t slots() const override { return uint32_t(slots_.size()); }
  vk::Buffer& send(uint64_t n) override { return slots_.at(n % slots_.size()); }
  bool wait_free(uint64_t n, const pipeline::StopFn& stop) override;
  void post(uint64_t n, vk::Device& producer, uint64_t value, std::string label) override;
  bool wait_arrived(uint64_t n, const pipeline::StopFn& stop) override;
  vk::Buffer& receive(uint64_t n) override { return slots_.at(n % slots_.size()); }
  void release(uint64_t n, vk::Device& consumer, uint64_t value) override;
  void drain() override {  // interrupted: the courier may have stopped on the failure too
    if (!interrupted_) courier_.drain();
  }
  std::vector<pipeline::Transfer> take_transfers() override;
  void interrupt() override;

 private:
  int tag(uint64_t n) const;
  void expect(uint64_t n, vk::Device* gate, uint64_t value);  // post the receive of transfer n
  // Marks transfer n done on `counter`, which then counts the contiguous prefix done.
  void complete(pipeline::Counter& counter, std::set<uint64_t>& done, uint64_t& next, uint64_t n);

  Courier& courier_;
  pipeline::RemoteEnd end_;
  int peer_;
  uint64_t bytes_;
  std::vector<vk::Buffer> slots_;
  int window_;  // transfer numbers per tag cycle
  std::mutex mutex_;
  pipeline::Counter arrived_, freed_;  // transfer numbers + 1
  std::set<uint64_t> arrived_set_, freed_set_;
  uint64_t arrived_next_ = 0, freed_next_ = 0;
  std::vector<pipeline::Transfer> transfers_;
  std::atomic<bool> interrupted_{false};  // aborting: the peer may never answer
};

}  // namespace brigade::mpi
