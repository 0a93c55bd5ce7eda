#include "pipeline/link.h"

#include <cstring>
#include <vector>

#include "util/error.h"
#include "vk/commands.h"

namespace brigade::pipeline {

LinkKind parse_link(const std::string& text) {
  if (text == "auto") return LinkKind::Auto;
  if (text == "fd") return LinkKind::Fd;
  if (text == "host") return LinkKind::Host;
  if (text == "staging") return LinkKind::Staging;
  throw UserError("`link`: '" + text + "' is not a path; expected auto, fd, host or staging");
}

const char* link_name(LinkKind kind) {
  switch (kind) {
    case LinkKind::Auto: return "auto";
    case LinkKind::Fd: return "fd";
    case LinkKind::Host: return "host";
    case LinkKind::Staging: return "staging";
    case LinkKind::Local: return "local";
    case LinkKind::Mpi: return "mpi";
  }
  return "?";
}

namespace {

std::string driver_of(const vk::Device& d) {
  return d.info().driver_name.empty() ? d.info().name : d.info().driver_name;
}

// Shares a small buffer from `producer` to `consumer` by `kind`, as a link's slot is shared
// (the producer exporting an fd): the producer fills it with `word` on its queue, the consumer
// copies its view of it into host memory of its own on its own queue, and the host compares
// what the consumer copied. The probe's bytes count against no cap: they are freed before
// anything else is allocated, and a cap's refusal is the plan's to give.
std::string carry(vk::Device& producer, vk::Device& consumer, LinkKind kind, uint32_t word) {
  constexpr uint64_t kBytes = 256;
  const auto cat = vk::Category::Transfer;
  vk::SharedBuffer shared =
      kind == LinkKind::Fd ? vk::share_fd(producer, consumer, kBytes, cat, "link probe", vk::Charge::Uncounted)
                           : vk::share_host(producer, consumer, kBytes, cat, "link probe", vk::Charge::Uncounted);
  vk::Commands write(producer, "link probe write");
  write.fill(shared.first, word);
  write.run();
  // Host memory the host maps on any device: read without a staging copy, which would count.
  vk::Buffer back(consumer, kBytes, cat, "link probe readback", vk::Residency::Host, vk::Charge::Uncounted);
  vk::Commands read(consumer, "link probe read");
  read.copy(shared.second, back, kBytes);
  read.run();
  const auto* got = static_cast<const uint32_t*>(back.mapped());
  for (uint64_t i = 0; i < kBytes / 4; ++i)
    if (got[i] != word)
      return "a test pattern written by " + producer.label() + " did not arrive through " + consumer.label() + "'s queue";
  return "";
}

// Both directions a boundary's links take: activations from `a` to `b`, gradients back.
std::string probe(vk::Device& a, vk::Device& b, LinkKind kind) {
  try {
    std::string problem = carry(a, b, kind, 0x5EC0DE01u);
    if (problem.empty()) problem = carry(b, a, kind, 0x5EC0DE02u);
    return problem;
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace

std::string link_problem(vk::Device& a, vk::Device& b, LinkKind kind) {
  switch (kind) {
    case LinkKind::Fd:
      if (!a.info().external_memory_fd || !b.info().external_memory_fd)
        return "VK_KHR_external_memory_fd is missing";
      if (a.info().device_uuid != b.info().device_uuid || a.info().driver_uuid != b.info().driver_uuid)
        return "opaque-fd memory needs one driver on one device (deviceUUID and driverUUID differ)";
      return probe(a, b, kind);
    case LinkKind::Host:
      if (!vk::can_share_host(a, b)) return "VK_EXT_external_memory_host is missing";
      return probe(a, b, kind);
    default: return "";
  }
}

LinkChoice choose_link(vk::Device& a, vk::Device& b, LinkKind requested) {
  if (&a == &b) return {LinkKind::Local, "one device: the next cell reads the buffer in place"};
  if (requested != LinkKind::Auto) {
    const std::string problem = link_problem(a, b, requested);
    if (!problem.empty())
      throw UserError("`link` " + std::string(link_name(requested)) + ": " + a.label() + " (" +
                      driver_of(a) + ") and " + b.label() + " (" + driver_of(b) +
                      ") cannot take this path: " + problem + "; use `link` auto");
    return {requested, "forced by `link`"};
  }
  std::string refused;
  for (LinkKind kind : {LinkKind::Fd, LinkKind::Host}) {
    const std::string problem = link_problem(a, b, kind);
    if (problem.empty())
      return {kind, std::string(kind == LinkKind::Fd ? "one device of one driver: opaque-fd memory"
                                          : "one host allocation imported into both devices") +
                        " carried a test pattern both ways" + refused};
    refused += std::string("; not ") + link_name(kind) + ": " + problem;
  }
  return {LinkKind::Staging, "a copy through mapped memory" + refused};
}

LinkMemory::LinkMemory(vk::Device& producer, vk::Device& consumer, uint64_t bytes, uint32_t slots,
           LinkKind kind, const std::string& name)
    : kind_(kind), bytes_(bytes) {
  BRIGADE_EXPECT(kind != LinkKind::Auto, "a link's path is chosen (choose_link) before it is built");
  for (uint32_t s = 0; s < slots; ++s) {
    const std::string slot_name = name + " slot " + std::to_string(s);
    const auto cat = vk::Category::Transfer;
    switch (kind_) {
      case LinkKind::Fd: slots_.push_back(vk::share_fd(producer, consumer, bytes, cat, slot_name)); break;
      case LinkKind::Host: slots_.push_back(vk::share_host(producer, consumer, bytes, cat, slot_name)); break;
      case LinkKind::Local: {
        vk::SharedBuffer sb;
        sb.first = vk::Buffer(producer, bytes, cat, slot_name);
        slots_.push_back(std::move(sb));
        break;
      }
      default: {
        // Host-visible on both sides so relay() is one memcpy between the two mappings.
        vk::SharedBuffer sb;
        sb.first = vk::Buffer(producer, bytes, cat, slot_name + " (send)", vk::Residency::Host);
        sb.second = vk::Buffer(consumer, bytes, cat, slot_name + " (receive)", vk::Residency::Host);
        slots_.push_back(std::move(sb));
      }
    }
  }
}

uint64_t LinkMemory::relay(uint32_t slot) {
  if (kind_ != LinkKind::Staging) return 0;
  auto& s = slots_.at(slot);
  std::memcpy(s.second.mapped(), s.first.mapped(), bytes_);
  return bytes_;
}

}  // namespace brigade::pipeline
