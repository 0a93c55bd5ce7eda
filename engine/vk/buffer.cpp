#include "vk/buffer.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

#include "util/units.h"
#include "vk/commands.h"
#include "vk/device.h"

namespace brigade::vk {
namespace {
std::atomic<uint64_t> next_serial{1};
}  // namespace

Buffer::Buffer(Device& device, uint64_t bytes, Category category, std::string name,
               Residency residency, Charge charge)
    : device_(&device), serial_(next_serial++), size_(bytes), category_(category), name_(std::move(name)),
      charged_(charge == Charge::Counted) {
  if (bytes == 0) throw VulkanError(name_ + ": a buffer of 0 bytes", VK_ERROR_UNKNOWN);
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = bytes;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  const auto& vk = device.vk();
  if (const VkResult r = vk.vkCreateBuffer(device.handle(), &info, nullptr, &buffer_); r != VK_SUCCESS) {
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
      throw OutOfMemory(device.label() + ": the driver refused a buffer of " + format_bytes(bytes) + " for " +
                        category_name(category) + " (" + name_ + "); set `memory_cap` below this device's "
                        "memory so the planner cuts for it, or add stages");
    fail(r, "vkCreateBuffer", __FILE__, __LINE__);
  }
  VkMemoryRequirements req;
  vk.vkGetBufferMemoryRequirements(device.handle(), buffer_, &req);
  try {
    allocation_ = device.memory().allocate(req, residency, category, bytes, name_, charge);
  } catch (...) {
    vk.vkDestroyBuffer(device.handle(), buffer_, nullptr);
    buffer_ = VK_NULL_HANDLE;
    throw;
  }
  VK_CHECK(vk.vkBindBufferMemory(device.handle(), buffer_, allocation_.memory, allocation_.offset));
  device.name(VK_OBJECT_TYPE_BUFFER, buffer_, name_);
}

Buffer::Buffer(Device& device, DedicatedMemory dedicated, uint64_t bytes, Category category,
               std::string name)
    : device_(&device), buffer_(dedicated.buffer), serial_(next_serial++), size_(bytes), category_(category),
      name_(std::move(name)), dedicated_(true), exchange_family_(dedicated.exchange_family), charged_(dedicated.charged) {
  allocation_.memory = dedicated.memory;
  allocation_.mapped = dedicated.mapped;
  try {
    if (charged_) device.memory().charge(category, bytes, name_);
  } catch (...) {
    device.vk().vkDestroyBuffer(device.handle(), buffer_, nullptr);
    device.vk().vkFreeMemory(device.handle(), dedicated.memory, nullptr);
    buffer_ = VK_NULL_HANDLE;
    throw;
  }
  device.name(VK_OBJECT_TYPE_BUFFER, buffer_, name_);
}

Buffer::Buffer(const Buffer& whole, uint64_t offset, uint64_t bytes, std::string name)
    : device_(whole.device_), serial_(next_serial++), size_(bytes), category_(whole.category_),
      name_(std::move(name)), whole_(&whole), whole_offset_(offset) {
  if (bytes == 0 || offset % kArenaAlign || offset + bytes > whole.size() || whole.whole_)
    throw VulkanError(name_ + ": " + std::to_string(bytes) + " bytes at " + std::to_string(offset) +
                          " are no part of arena '" + whole.name() + "' (" + std::to_string(whole.size()) + " bytes)",
                      VK_ERROR_UNKNOWN);
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = bytes;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  const auto& vk = device_->vk();
  VK_CHECK(vk.vkCreateBuffer(device_->handle(), &info, nullptr, &buffer_));
  allocation_.memory = whole.allocation_.memory;
  allocation_.offset = whole.allocation_.offset + offset;
  allocation_.mapped = whole.mapped() ? static_cast<char*>(whole.mapped()) + offset : nullptr;
  VkMemoryRequirements req;
  vk.vkGetBufferMemoryRequirements(device_->handle(), buffer_, &req);
  if (allocation_.offset % req.alignment) {
    vk.vkDestroyBuffer(device_->handle(), buffer_, nullptr);
    buffer_ = VK_NULL_HANDLE;
    throw VulkanError(device_->label() + ": a buffer must start at a multiple of " + std::to_string(req.alignment) +
                          " bytes, more than the arena alignment of " + std::to_string(kArenaAlign),
                      VK_ERROR_UNKNOWN);
  }
  VK_CHECK(vk.vkBindBufferMemory(device_->handle(), buffer_, allocation_.memory, allocation_.offset));
  device_->name(VK_OBJECT_TYPE_BUFFER, buffer_, name_);
}

ArenaLayout arena_layout(const std::vector<uint64_t>& sizes) {
  ArenaLayout a;
  for (uint64_t s : sizes) {
    a.offsets.push_back(a.bytes);
    a.bytes = arena_align(a.bytes + s);
  }
  return a;
}

Buffer::~Buffer() { release(); }

void Buffer::release() {
  if (!buffer_) return;
  device_->vk().vkDestroyBuffer(device_->handle(), buffer_, nullptr);
  if (whole_) {
    // a part: the arena holds the memory
  } else if (dedicated_) {
    device_->vk().vkFreeMemory(device_->handle(), allocation_.memory, nullptr);
    if (charged_) device_->memory().refund(category_, size_);
  } else {
    device_->memory().free(allocation_, category_, charged_ ? size_ : 0);
  }
  buffer_ = VK_NULL_HANDLE;
}

Buffer::Buffer(Buffer&& o) noexcept { *this = std::move(o); }

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    device_ = o.device_;
    buffer_ = std::exchange(o.buffer_, VK_NULL_HANDLE);
    serial_ = std::exchange(o.serial_, 0);
    size_ = o.size_;
    category_ = o.category_;
    name_ = std::move(o.name_);
    allocation_ = o.allocation_;
    dedicated_ = o.dedicated_;
    exchange_family_ = o.exchange_family_;
    charged_ = o.charged_;
    whole_ = o.whole_;
    whole_offset_ = o.whole_offset_;
  }
  return *this;
}

namespace {
void check_range(const Buffer& b, uint64_t bytes, uint64_t offset) {
  if (offset + bytes > b.size())
    throw VulkanError(b.name() + ": copy of " + std::to_string(bytes) + " bytes at offset " +
                          std::to_string(offset) + " overruns its " + std::to_string(b.size()) +
                          " bytes",
                      VK_ERROR_UNKNOWN);
}

// Copies `bytes` between `host` and `b` at `offset` through staging memory, a chunk at a time.
void staged_copy(const Buffer& b, char* host, uint64_t bytes, uint64_t offset, bool to_device) {
  Device& dev = b.device();
  std::lock_guard lock(dev.staging_mutex());
  const uint64_t chunk = std::min(bytes, kStagingBytes);
  const std::string what = (to_device ? "upload " : "download ") + b.name();
  Buffer staging(dev, chunk, Category::Transfer, what + " staging", Residency::Host);
  Commands cmd(dev, what);
  for (uint64_t done = 0; done < bytes; done += chunk) {
    const uint64_t n = std::min(chunk, bytes - done);
    if (done) cmd.reset();
    if (to_device) {
      std::memcpy(staging.mapped(), host + done, n);
      cmd.copy(staging, b, n, 0, offset + done);
    } else {
      cmd.copy(b, staging, n, offset + done, 0);
    }
    cmd.run();
    if (!to_device) std::memcpy(host + done, staging.mapped(), n);
  }
}
}  // namespace

void upload(Buffer& dst, const void* src, uint64_t bytes, uint64_t offset) {
  check_range(dst, bytes, offset);
  if (dst.mapped())
    std::memcpy(static_cast<char*>(dst.mapped()) + offset, src, bytes);
  else if (bytes)
    staged_copy(dst, static_cast<char*>(const_cast<void*>(src)), bytes, offset, true);
}

void zero(Buffer& dst) {
  Commands cmd(dst.device(), "zero " + dst.name());
  cmd.fill(dst);
  cmd.run();
}

void download(const Buffer& src, void* dst, uint64_t bytes, uint64_t offset) {
  check_range(src, bytes, offset);
  if (src.mapped())
    std::memcpy(dst, static_cast<const char*>(src.mapped()) + offset, bytes);
  else if (bytes)
    staged_copy(src, static_cast<char*>(dst), bytes, offset, false);
}

}  // namespace brigade::vk
