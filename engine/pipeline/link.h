// A Link carries one boundary tensor per micro-batch from one stage's device to its
// neighbour's: activations forward, gradients backward. The path is chosen per pair of
// devices (DESIGN.md): opaque-fd memory within one driver, host memory imported into both
// across drivers, staging copies through mapped memory as the last resort. Each link has
// several slots so the transfer of one micro-batch overlaps the compute of the next.
// Ordering is the executor's job: it signals the consumer only after the producer's writes
// complete and relay() has run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vk/buffer.h"
#include "vk/device.h"
#include "vk/external.h"

namespace brigade::pipeline {

// Local: both cells on one device (an interleaved schedule on one stage); nothing moves.
enum class LinkKind { Auto, Fd, Host, Staging, Local };

LinkKind parse_link(const std::string& text);  // "auto" | "fd" | "host" | "staging"
const char* link_name(LinkKind kind);

// The path between two neighbouring stages' devices, and why it was taken.
struct LinkChoice {
  LinkKind kind = LinkKind::Staging;
  std::string why;
};

// Why `kind` cannot join `a` and `b`, or "" when it can: the capability checks, then a probe
// that shares a small buffer by that path and moves a test pattern each way through the two
// devices' queues. Staging always can.
std::string link_problem(vk::Device& a, vk::Device& b, LinkKind kind);
// The path for the boundary between `a` and `b` (both directions use it): under Auto the first
// of fd, host and staging that the pair proves it can take; a forced path the pair cannot
// take is refused with a UserError naming both devices and drivers, before anything else is
// allocated.
LinkChoice choose_link(vk::Device& a, vk::Device& b, LinkKind requested);

class Link {
 public:
  // `kind` is a path choose_link chose for these devices (not Auto).
  Link(vk::Device& producer, vk::Device& consumer, uint64_t bytes, uint32_t slots,
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
