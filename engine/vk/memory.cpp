#include "vk/memory.h"

#include <algorithm>

#include "util/units.h"

namespace brigade::vk {

const char* category_name(Category c) {
  static const char* names[kCategories] = {"parameters", "gradients",      "optimizer state",
                                           "activations", "transfer buffers", "scratch"};
  return names[static_cast<int>(c)];
}

namespace {
constexpr VkMemoryPropertyFlags kHostMappable = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
}

bool maps_device_memory(const VkPhysicalDeviceMemoryProperties& props) {
  const VkMemoryPropertyFlags want = kHostMappable | VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
  for (uint32_t i = 0; i < props.memoryTypeCount; ++i)
    if (props.memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
      return (props.memoryTypes[i].propertyFlags & want) == want;
  return false;
}

Allocator::Allocator(const VolkDeviceTable& vk, VkDevice device, VkPhysicalDevice physical,
                     std::string label, uint64_t max_allocation, uint64_t cap, bool map_device)
    : vk_(vk), device_(device), label_(std::move(label)), max_allocation_(max_allocation), map_device_(map_device) {
  vkGetPhysicalDeviceMemoryProperties(physical, &props_);
  stats_.cap = cap;
}

Allocator::~Allocator() {
  for (auto& b : blocks_)
    if (b.memory) vk_.vkFreeMemory(device_, b.memory, nullptr);
}

uint32_t Allocator::pick_type(uint32_t bits, Residency residency) const {
  const VkMemoryPropertyFlags host = kHostMappable;
  auto find = [&](VkMemoryPropertyFlags want) -> int {
    for (uint32_t i = 0; i < props_.memoryTypeCount; ++i)
      if ((bits & (1u << i)) && (props_.memoryTypes[i].propertyFlags & want) == want) return int(i);
    return -1;
  };
  int t = -1;
  if (residency == Residency::Device) {
    // The first device-local type is the driver's best; it is mapped when it is host-visible.
    t = find(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    if (t < 0) t = find(0);
  } else {
    t = find(host | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    if (t < 0) t = find(host);
  }
  if (t < 0)
    throw VulkanError(label_ + ": no memory type fits the buffer (type bits " +
                          std::to_string(bits) + ")",
                      VK_ERROR_FEATURE_NOT_PRESENT);
  return uint32_t(t);
}

int Allocator::new_block(VkDeviceSize size, uint32_t type, bool map, bool dedicated, const std::string& what,
                         Category category) {
  VkMemoryAllocateInfo info{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  info.allocationSize = size;
  info.memoryTypeIndex = type;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkResult r = vk_.vkAllocateMemory(device_, &info, nullptr, &memory);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
    driver_out_of_memory(size, category, what);
  VK_CHECK(r);
  Block b;
  b.memory = memory;
  b.size = size;
  b.type = type;
  b.dedicated = dedicated;
  b.free[0] = size;
  if (map) VK_CHECK(vk_.vkMapMemory(device_, memory, 0, VK_WHOLE_SIZE, 0, &b.mapped));
  stats_.reserved += size;
  for (size_t i = 0; i < blocks_.size(); ++i)
    if (!blocks_[i].memory) {
      blocks_[i] = std::move(b);
      return int(i);
    }
  blocks_.push_back(std::move(b));
  return int(blocks_.size() - 1);
}

bool Allocator::take(Block& b, VkDeviceSize size, VkDeviceSize align, VkDeviceSize& offset) {
  for (auto it = b.free.begin(); it != b.free.end(); ++it) {
    const VkDeviceSize start = (it->first + align - 1) / align * align;
    const VkDeviceSize end = it->first + it->second;
    if (start + size > end) continue;
    const VkDeviceSize before = start - it->first, after = end - (start + size);
    const VkDeviceSize free_start = it->first;
    b.free.erase(it);
    if (before) b.free[free_start] = before;
    if (after) b.free[start + size] = after;
    offset = start;
    return true;
  }
  return false;
}

void Allocator::driver_out_of_memory(uint64_t bytes, Category category, const std::string& what) {
  throw OutOfMemory(label_ + ": the driver is out of memory allocating " + format_bytes(bytes) +
                    " for " + category_name(category) + " (" + what + "); " +
                    format_bytes(stats_.total_current) + " in use by Brigade on this device; set `memory_cap` "
                    "below the memory this device has free, so the planner cuts for it, or add stages");
}

void Allocator::check_cap_locked(Category category, uint64_t bytes, const std::string& what) const {
  if (stats_.cap && stats_.total_current + bytes > stats_.cap)
    throw OutOfMemory(label_ + ": out of memory under `memory_cap`: " + category_name(category) +
                      " (" + what + ") needs " + format_bytes(bytes) + ", " +
                      format_bytes(stats_.total_current) + " already in use of the " +
                      format_bytes(stats_.cap) + " cap; add stages, use more micro-batches with `remat` "
                      "always, or raise the cap");
}

void Allocator::charge_locked(Category category, uint64_t bytes, const std::string& what) {
  check_cap_locked(category, bytes, what);
  const int c = static_cast<int>(category);
  stats_.current[c] += bytes;
  stats_.total_current += bytes;
  stats_.peak[c] = std::max(stats_.peak[c], stats_.current[c]);
  stats_.total_peak = std::max(stats_.total_peak, stats_.total_current);
}

void Allocator::refund_locked(Category category, uint64_t bytes) {
  stats_.current[static_cast<int>(category)] -= bytes;
  stats_.total_current -= bytes;
}

void Allocator::charge(Category category, uint64_t bytes, const std::string& what) {
  std::lock_guard lock(mutex_);
  charge_locked(category, bytes, what);
}

void Allocator::refund(Category category, uint64_t bytes) {
  std::lock_guard lock(mutex_);
  refund_locked(category, bytes);
}

VkDeviceMemory Allocator::allocate_dedicated(const VkMemoryAllocateInfo& info, Category category,
                                             const std::string& what) {
  std::lock_guard lock(mutex_);
  VkDeviceMemory memory = VK_NULL_HANDLE;
  const VkResult r = vk_.vkAllocateMemory(device_, &info, nullptr, &memory);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
    driver_out_of_memory(info.allocationSize, category, what);
  VK_CHECK(r);
  return memory;
}

Allocation Allocator::allocate(const VkMemoryRequirements& req, Residency residency,
                               Category category, uint64_t bytes, const std::string& what, Charge charge) {
  std::lock_guard lock(mutex_);
  if (charge == Charge::Uncounted) bytes = 0;
  check_cap_locked(category, bytes, what);  // before any block is allocated
  if (req.size > max_allocation_)
    throw OutOfMemory(label_ + ": " + what + " needs " + format_bytes(req.size) +
                      ", over this device's largest allocation (maxMemoryAllocationSize " +
                      format_bytes(max_allocation_) + ")");

  const uint32_t type = pick_type(req.memoryTypeBits, residency);
  const bool map = (props_.memoryTypes[type].propertyFlags & kHostMappable) == kHostMappable &&
                   (residency == Residency::Host || map_device_);
  Allocation a;
  const VkDeviceSize size = (req.size + req.alignment - 1) / req.alignment * req.alignment;
  const VkDeviceSize block_size = std::min<VkDeviceSize>(kBlockSize, max_allocation_);
  if (size > block_size / 2) {
    a.block = new_block(size, type, map, true, what, category);
    blocks_[a.block].free.clear();
    a.offset = 0;
  } else {
    for (size_t i = 0; i < blocks_.size() && a.block < 0; ++i) {
      Block& b = blocks_[i];
      if (b.memory && !b.dedicated && b.type == type && (b.mapped != nullptr) == map &&
          take(b, size, req.alignment, a.offset))
        a.block = int(i);
    }
    if (a.block < 0) {
      a.block = new_block(block_size, type, map, false, what, category);
      take(blocks_[a.block], size, req.alignment, a.offset);
    }
  }
  const Block& b = blocks_[a.block];
  a.memory = b.memory;
  a.size = size;
  a.mapped = b.mapped ? static_cast<char*>(b.mapped) + a.offset : nullptr;
  charge_locked(category, bytes, what);
  return a;
}

void Allocator::free(const Allocation& a, Category category, uint64_t bytes) {
  if (a.block < 0) return;
  std::lock_guard lock(mutex_);
  refund_locked(category, bytes);
  Block& b = blocks_[a.block];
  if (b.dedicated) {
    vk_.vkFreeMemory(device_, b.memory, nullptr);
    stats_.reserved -= b.size;
    b = Block{};
    return;
  }
  auto it = b.free.emplace(a.offset, a.size).first;
  if (auto next = std::next(it); next != b.free.end() && it->first + it->second == next->first) {
    it->second += next->second;
    b.free.erase(next);
  }
  if (it != b.free.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      b.free.erase(it);
    }
  }
}

MemoryStats Allocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Allocator::reset_peaks() {
  std::lock_guard lock(mutex_);
  stats_.peak = stats_.current;
  stats_.total_peak = stats_.total_current;
}

void Allocator::set_cap(uint64_t cap) {
  std::lock_guard lock(mutex_);
  stats_.cap = cap;
}

uint64_t Allocator::cap() const {
  std::lock_guard lock(mutex_);
  return stats_.cap;
}

}  // namespace brigade::vk
