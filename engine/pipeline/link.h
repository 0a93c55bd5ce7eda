// A Link carries one boundary tensor per micro-batch from one cell's device to its
// neighbour's, in one direction: activations forward, gradients backward. Each link has
// several slots so the transfer of one micro-batch overlaps the compute of the next;
// transfer n (a sequence number that runs on across steps and evaluations) takes slot
// n % slots. How the tensor travels is the implementation's business:
//   - in one process (ProcessLink, process_link.h): memory both devices see, chosen per
//     pair of devices (DESIGN.md): opaque-fd memory within one driver, host memory imported
//     into both across drivers, staging copies through mapped memory as the last resort;
//   - between processes (mpi::MpiLink): MPI messages from and into mapped memory.
// The executor only calls the interface below, from the producing and consuming cells'
// stage threads.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "pipeline/relay.h"
#include "vk/buffer.h"
#include "vk/device.h"
#include "vk/external.h"

namespace brigade::pipeline {

// Local: both cells on one device (an interleaved schedule on one stage); nothing moves.
// Mpi: the cells run in different processes.
enum class LinkKind { Auto, Fd, Host, Staging, Local, Mpi };

LinkKind parse_link(const std::string& text);  // "auto" | "fd" | "host" | "staging"
const char* link_name(LinkKind kind);

// The path between two neighbouring stages' devices, and why it was taken.
struct LinkChoice {
  LinkKind kind = LinkKind::Staging;
  std::string why;
};

// Why `kind` cannot join `a` and `b`, or "" when it can: the capability checks, then a probe
// in each direction, shared as that direction's link shares its slots: a small buffer the
// producing device fills with a test pattern on its queue and the consuming device copies on
// its own, the host checking the copy. The probe's memory counts against no cap. Staging
// always can.
std::string link_problem(vk::Device& a, vk::Device& b, LinkKind kind);
// The path for the boundary between `a` and `b` (both directions use it): under Auto the first
// of fd, host and staging that the pair proves it can take; a forced path the pair cannot
// take is refused with a UserError naming both devices and drivers, before anything else is
// allocated.
LinkChoice choose_link(vk::Device& a, vk::Device& b, LinkKind requested);

// Tells a blocked wait to give up (the pipeline is aborting).
using StopFn = std::function<bool()>;

class Link {
 public:
  virtual ~Link() = default;
  virtual uint64_t bytes() const = 0;
  virtual uint32_t slots() const = 0;
  // The producer's side (calls only where the producing cell runs in this process).
  // Where the producer's kernels write transfer n (slot n % slots).
  virtual vk::Buffer& send(uint64_t n) = 0;
  // Blocks until transfer n's slot may be written: transfer n - slots left it. False when
  // `stop` said so first.
  virtual bool wait_free(uint64_t n, const StopFn& stop) = 0;
  // Transfer n is written once `producer`'s queue timeline reaches `value`: carry it over.
  // `label` names it in the trace.
  virtual void post(uint64_t n, vk::Device& producer, uint64_t value, std::string label) = 0;
  // The consumer's side (calls only where the consuming cell runs in this process).
  // Blocks until transfer n has arrived; false when `stop` said so first.
  virtual bool wait_arrived(uint64_t n, const StopFn& stop) = 0;
  // Where the consumer's kernels read transfer n.
  virtual vk::Buffer& receive(uint64_t n) = 0;
  // The last reader of transfer n completes when `consumer`'s queue timeline reaches `value`;
  // then its slot may take transfer n + slots.
  virtual void release(uint64_t n, vk::Device& consumer, uint64_t value) = 0;
  // Blocks until everything posted and released has been carried out (or the pipeline
  // aborted).
  virtual void drain() = 0;
  // The transfers carried since the last call, for the trace (this process's side).
  virtual std::vector<Transfer> take_transfers() = 0;
  // Unblocks every wait: the pipeline is aborting.
  virtual void interrupt() = 0;
};

// The memory of an in-process link: per slot, the producer's buffer and the consumer's (one
// and the same for fd, host and local paths).
class LinkMemory {
 public:
  // `kind` is a path choose_link chose for these devices (not Auto).
  LinkMemory(vk::Device& producer, vk::Device& consumer, uint64_t bytes, uint32_t slots,
       LinkKind kind, const std::string& name);

  LinkKind kind() const { return kind_; }
  uint64_t bytes() const { return bytes_; }
  uint32_t slots() const { return uint32_t(slots_.size()); }
  // Where the producer's kernels write micro-batch data for `slot`.
  vk::Buffer& send(uint32_t slot) { return slots_.at(slot).first; }
  // Where the consumer's kernels read it.
  vk::Buffer& receive(uint32_t slot) { return kind_ == LinkKind::Local ? slots_.at(slot).first : slots_.at(slot).second; }
  // Host-side step between the producer finishing and the consumer starting: the copy for
  // staging links, nothing for shared memory. Returns the bytes copied.
  uint64_t relay(uint32_t slot);

 private:
  LinkKind kind_;
  uint64_t bytes_;
  std::vector<vk::SharedBuffer> slots_;
};

}  // namespace brigade::pipeline
