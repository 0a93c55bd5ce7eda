// One command a Commands recorded, kept with the arguments that made it: the kernel, the
// views it bound (by buffer serial, offset and range), its push constants and groups; a
// copy's or a fill's buffers and bytes; a timestamp; a barrier before everything. A
// recording's calls are what Commands compares a later recording with, call by call, to
// resubmit the command buffer it holds instead of recording the same work again (replay).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

#include "vk/buffer.h"
#include "vk/kernel.h"

namespace brigade::vk {

struct Groups {
  uint32_t x = 1, y = 1, z = 1;
};

struct Call {
  enum class Kind : uint8_t { Dispatch, Copy, Fill, Timestamp, Barrier };
  static constexpr uint32_t kMaxViews = 16;  // a kernel binding more is refused

  Kind kind = Kind::Barrier;
  uint8_t views = 0;
  uint32_t push_bytes = 0;
  uint32_t word = 0;          // a fill's
  uint32_t barriers = 0;      // the barriers its recording took before it (Commands::touch)
  const Kernel* kernel = nullptr;
  Groups groups;
  uint64_t bytes = 0;         // a copy's; its views are the source and the destination
  // Bound views: the buffer as the caller passed it (to record the call again), and what the
  // comparison reads.
  struct Bound {
    const Buffer* buffer;
    uint64_t serial, offset, range;
  };
  std::array<Bound, kMaxViews> view;
  std::array<uint8_t, kMaxPushBytes> push;

  void add(const Buffer& b, uint64_t at, uint64_t len) {
    view[views++] = {&b, b.serial(), at, len};
  }
  // The same command with the same arguments (the buffer pointers aside: a buffer moved
  // keeps its serial).
  bool same(const Call& o) const {
    if (kind != o.kind || views != o.views || kernel != o.kernel || push_bytes != o.push_bytes || word != o.word ||
        bytes != o.bytes || groups.x != o.groups.x || groups.y != o.groups.y || groups.z != o.groups.z)
      return false;
    for (uint32_t i = 0; i < views; ++i)
      if (view[i].serial != o.view[i].serial || view[i].offset != o.view[i].offset || view[i].range != o.view[i].range)
        return false;
    return std::memcmp(push.data(), o.push.data(), push_bytes) == 0;
  }
};

}  // namespace brigade::vk
