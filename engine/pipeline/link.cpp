#include "pipeline/link.h"

#include <cstring>

#include "vk/check.h"

namespace brigade::pipeline {

LinkKind parse_link(const std::string& text) {
  if (text == "auto") return LinkKind::Auto;
  if (text == "fd") return LinkKind::Fd;
  if (text == "host") return LinkKind::Host;
  if (text == "staging") return LinkKind::Staging;
  throw UserError("--link: '" + text + "' is not a path; expected auto, fd, host or staging");
}

const char* link_name(LinkKind kind) {
  switch (kind) {
    case LinkKind::Auto: return "auto";
    case LinkKind::Fd: return "fd";
    case LinkKind::Host: return "host";
    case LinkKind::Staging: return "staging";
  }
  return "?";
}

LinkKind resolve_link(const vk::Device& producer, const vk::Device& consumer, LinkKind requested) {
  const bool fd = vk::can_share_fd(producer, consumer), host = vk::can_share_host(producer, consumer);
  switch (requested) {
    case LinkKind::Auto: return fd ? LinkKind::Fd : host ? LinkKind::Host : LinkKind::Staging;
    case LinkKind::Fd:
      if (!fd)
        throw UserError("--link fd: " + producer.label() + " and " + consumer.label() +
                        " are not one device of one driver (deviceUUID/driverUUID differ or "
                        "VK_KHR_external_memory_fd is missing); use --link host or auto");
      return requested;
    case LinkKind::Host:
      if (!host)
        throw UserError("--link host: " + producer.label() + " or " + consumer.label() +
                        " lacks VK_EXT_external_memory_host; use --link staging or auto");
      return requested;
    case LinkKind::Staging: return requested;
  }
  return requested;
}

Link::Link(vk::Device& producer, vk::Device& consumer, uint64_t bytes, uint32_t slots,
           LinkKind requested, const std::string& name)
    : kind_(resolve_link(producer, consumer, requested)), bytes_(bytes) {
  for (uint32_t s = 0; s < slots; ++s) {
    const std::string slot_name = name + " slot " + std::to_string(s);
    const auto cat = vk::Category::Transfer;
    switch (kind_) {
      case LinkKind::Fd: slots_.push_back(vk::share_fd(producer, consumer, bytes, cat, slot_name)); break;
      case LinkKind::Host: slots_.push_back(vk::share_host(producer, consumer, bytes, cat, slot_name)); break;
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

uint64_t Link::relay(uint32_t slot) {
  if (kind_ != LinkKind::Staging) return 0;
  auto& s = slots_.at(slot);
  std::memcpy(s.second.mapped(), s.first.mapped(), bytes_);
  return bytes_;
}

}  // namespace brigade::pipeline
