// Per-device memory: sub-allocates buffers from large VkDeviceMemory blocks, accounts
// current and peak bytes per category, and enforces an optional cap, which is
// how small GPUs are simulated.
#pragma once

#include <volk.h>

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "vk/check.h"

namespace brigade::vk {

enum class Category : int { Parameters, Gradients, Optimizer, Activations, Transfer, Scratch };
inline constexpr int kCategories = 6;
const char* category_name(Category c);

// Device: fastest for the GPU (device-local; mapped too where the device is host-visible,
// as on lavapipe and integrated GPUs). Host: host-visible coherent, for staging and readback.
enum class Residency { Device, Host };

struct MemoryStats {
  std::array<uint64_t, kCategories> current{};
  std::array<uint64_t, kCategories> peak{};
  uint64_t total_current = 0;
  uint64_t total_peak = 0;
  uint64_t reserved = 0;  // bytes of VkDeviceMemory held in blocks
  uint64_t cap = 0;       // 0 = no cap
};

// An allocation past the cap, or one the driver refused for lack of memory.
struct OutOfMemory : UserError {
  using UserError::UserError;
};

struct Allocation {
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkDeviceSize offset = 0;
  VkDeviceSize size = 0;      // bytes reserved in the block (aligned)
  void* mapped = nullptr;     // host pointer to offset, when the memory type is host-visible
  int block = -1;             // index into the allocator's blocks
};

class Allocator {
 public:
  Allocator(const VolkDeviceTable& vk, VkDevice device, VkPhysicalDevice physical,
            std::string label, uint64_t max_allocation, uint64_t cap);
  ~Allocator();
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // `bytes` is what the cap and the statistics count: the buffer's requested size.
  Allocation allocate(const VkMemoryRequirements& req, Residency residency, Category category,
                      uint64_t bytes, const std::string& what);
  void free(const Allocation& a, Category category, uint64_t bytes);
  // Counts memory the allocator does not hold (external and imported buffers) against the
  // cap and in the statistics.
  void charge(Category category, uint64_t bytes, const std::string& what);
  void refund(Category category, uint64_t bytes);
  VkDeviceMemory allocate_dedicated(const VkMemoryAllocateInfo& info, Category category,
                                    const std::string& what);
  const VkPhysicalDeviceMemoryProperties& properties() const { return props_; }

  MemoryStats stats() const;
  void reset_peaks();
  void set_cap(uint64_t cap);
  uint64_t cap() const;

  static constexpr VkDeviceSize kBlockSize = 64ull << 20;

 private:
  struct Block {
    VkDeviceMemory memory = VK_NULL_HANDLE;
    VkDeviceSize size = 0;
    uint32_t type = 0;
    void* mapped = nullptr;
    bool dedicated = false;
    std::map<VkDeviceSize, VkDeviceSize> free;  // offset -> size, coalesced
  };

  void check_cap_locked(Category category, uint64_t bytes, const std::string& what) const;
  void charge_locked(Category category, uint64_t bytes, const std::string& what);
  void refund_locked(Category category, uint64_t bytes);
  [[noreturn]] void driver_out_of_memory(uint64_t bytes, Category category, const std::string& what);
  uint32_t pick_type(uint32_t type_bits, Residency residency) const;
  int new_block(VkDeviceSize size, uint32_t type, bool dedicated, const std::string& what,
                Category category);
  static bool take(Block& b, VkDeviceSize size, VkDeviceSize align, VkDeviceSize& offset);

  const VolkDeviceTable& vk_;
  VkDevice device_;
  std::string label_;
  uint64_t max_allocation_;
  VkPhysicalDeviceMemoryProperties props_{};
  mutable std::mutex mutex_;
  std::vector<Block> blocks_;
  MemoryStats stats_;
};

}  // namespace brigade::vk
