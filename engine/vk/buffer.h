// A storage buffer on one device, with memory from the device's allocator. Move-only.
#pragma once

#include <volk.h>

#include <cstdint>
#include <string>
#include <vector>

#include "vk/memory.h"

namespace brigade::vk {

class Device;

// A VkBuffer bound to its own VkDeviceMemory (exported or imported, see vk/external.h).
struct DedicatedMemory {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;
  bool charged = true;  // counted against the device's cap and in its statistics
  // The queue family the memory is exchanged with between recordings (vk::Commands):
  // VK_QUEUE_FAMILY_EXTERNAL for another device of one driver, VK_QUEUE_FAMILY_FOREIGN_EXT for
  // any other.
  uint32_t exchange_family = VK_QUEUE_FAMILY_EXTERNAL;
};

// Where a buffer's bytes lie: what command recording orders accesses by, so that a part of an
// arena and the arena itself are seen to touch the same bytes.
struct Extent {
  VkDeviceMemory memory = VK_NULL_HANDLE;
  uint64_t begin = 0, end = 0;
  bool overlaps(const Extent& o) const { return memory == o.memory && begin < o.end && o.begin < end; }
};

// Tensors laid out one after another in one buffer (an arena), each starting at a multiple of
// kArenaAlign bytes (the largest minStorageBufferOffsetAlignment Vulkan allows): kernels bind
// each as a part of its own, and whole-arena passes (an optimizer update, zeroing gradients)
// run once over all of them.
constexpr uint64_t kArenaAlign = 256;
inline uint64_t arena_align(uint64_t bytes) { return (bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign; }
// The arena for tensors of these sizes: each one's offset, and the arena's bytes.
struct ArenaLayout {
  std::vector<uint64_t> offsets;
  uint64_t bytes = 0;
};
ArenaLayout arena_layout(const std::vector<uint64_t>& sizes);

class Buffer {
 public:
  Buffer() = default;
  Buffer(Device& device, uint64_t bytes, Category category, std::string name,
         Residency residency = Residency::Device, Charge charge = Charge::Counted);
  // Takes ownership of both handles; the bytes count against the device's cap where
  // `dedicated.charged` says so. On failure both are released.
  Buffer(Device& device, DedicatedMemory dedicated, uint64_t bytes, Category category,
         std::string name);
  // A part of an arena: bytes [offset, offset + bytes) of `whole`'s memory, offset a multiple
  // of kArenaAlign. It holds no memory of its own and counts nothing against the cap; `whole`
  // must outlive it and stay where it is.
  Buffer(const Buffer& whole, uint64_t offset, uint64_t bytes, std::string name);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  uint64_t size() const { return size_; }
  Category category() const { return category_; }
  const std::string& name() const { return name_; }
  Device& device() const { return *device_; }
  // Host pointer when the memory is host-visible (always on lavapipe), else nullptr.
  void* mapped() const { return allocation_.mapped; }
  VkDeviceMemory memory() const { return allocation_.memory; }
  // Unique to this buffer in the process, never reused (a VkBuffer handle may be): what a
  // cache of descriptor sets keys on.
  uint64_t serial() const { return serial_; }
  Extent extent() const { return {allocation_.memory, allocation_.offset, allocation_.offset + size_}; }
  // The arena a part lies in and where in it; a buffer that is no part is its own whole, at 0.
  const Buffer& whole() const { return whole_ ? *whole_ : *this; }
  uint64_t offset_in_whole() const { return whole_offset_; }
  // Memory another device sees too (exported, imported or a host allocation; vk/external.h).
  bool shared() const { return dedicated_; }
  uint32_t exchange_family() const { return exchange_family_; }  // of shared memory (DedicatedMemory)
  explicit operator bool() const { return buffer_ != VK_NULL_HANDLE; }

 private:
  void release();

  Device* device_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  uint64_t serial_ = 0;
  uint64_t size_ = 0;
  Category category_ = Category::Scratch;
  std::string name_;
  Allocation allocation_;
  bool dedicated_ = false;
  uint32_t exchange_family_ = VK_QUEUE_FAMILY_EXTERNAL;
  bool charged_ = true;  // its bytes count against the cap (Charge)
  const Buffer* whole_ = nullptr;  // set for a part of an arena, which owns no memory
  uint64_t whole_offset_ = 0;
};

// Host <-> device copies. Direct memcpy when the buffer is mapped; otherwise through a
// staging buffer of at most kStagingBytes, the device's only one while it lasts, and copies on
// the device's queue, a chunk at a time. Blocking.
inline constexpr uint64_t kStagingBytes = 8ull << 20;
void upload(Buffer& dst, const void* src, uint64_t bytes, uint64_t offset = 0);
// Every word of dst zero, written by the device: no host memory, no staging copy.
void zero(Buffer& dst);
void download(const Buffer& src, void* dst, uint64_t bytes, uint64_t offset = 0);

}  // namespace brigade::vk
