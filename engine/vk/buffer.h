// A storage buffer on one device, with memory from the device's allocator. Move-only.
#pragma once

#include <volk.h>

#include <cstdint>
#include <string>

#include "vk/memory.h"

namespace brigade::vk {

class Device;

// A VkBuffer bound to its own VkDeviceMemory (exported or imported, see vk/external.h).
struct DedicatedMemory {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;
};

class Buffer {
 public:
  Buffer() = default;
  Buffer(Device& device, uint64_t bytes, Category category, std::string name,
         Residency residency = Residency::Device);
  // Takes ownership of both handles; the bytes count against the device's cap.
  Buffer(Device& device, DedicatedMemory dedicated, uint64_t bytes, Category category,
         std::string name);
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
};

// Host <-> device copies. Direct memcpy when the buffer is mapped; otherwise through a
// staging buffer and a copy on the device's queue. Blocking.
void upload(Buffer& dst, const void* src, uint64_t bytes, uint64_t offset = 0);
void download(const Buffer& src, void* dst, uint64_t bytes, uint64_t offset = 0);

}  // namespace brigade::vk
