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

// Whether a buffer's bytes count against its device's cap and in its statistics: a tensor's
// and a link's slots do; a link probe's few bytes, freed before anything else is allocated,
// do not.
enum class Charge { Counted, Uncounted };

// Device: fastest for the GPU (device-local; mapped too where maps_device_memory says, as on
// lavapipe). Host: host-visible coherent, for staging and readback.
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

// Whether the host maps the memory type Brigade takes for Residency::Device (the first
// device-local one): where it is host-visible, coherent and cached, so that the host reads it
// as fast as its own (CPU drivers; integrated GPUs whose first device-local type is cached).
// Discrete GPUs' is not host-visible, or
// is write-combined memory behind a PCIe BAR (Intel Arc's first type), which the host reads
// slowly: those copies go through staging buffers (vk::upload).
bool maps_device_memory(const VkPhysicalDeviceMemoryProperties& props);

class Allocator {
 public:
  // map_device: whether Residency::Device memory is mapped where its type is host-visible
  // (PhysicalInfo::device_memory_mapped); Residency::Host memory always is.
  Allocator(const VolkDeviceTable& vk, VkDevice device, VkPhysicalDevice physical,
            std::string label, uint64_t max_allocation, uint64_t cap, bool map_device = true);
  ~Allocator();
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // `bytes` is what the cap and the statistics count (the buffer's requested size), unless
  // `charge` says it counts nothing: then free() takes 0 bytes for it.
  Allocation allocate(const VkMemoryRequirements& req, Residency residency, Category category,
                      uint64_t bytes, const std::string& what, Charge charge = Charge::Counted);
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
  int new_block(VkDeviceSize size, uint32_t type, bool map, bool dedicated, const std::string& what,
                Category category);
  static bool take(Block& b, VkDeviceSize size, VkDeviceSize align, VkDeviceSize& offset);

  const VolkDeviceTable& vk_;
  VkDevice device_;
  std::string label_;
  uint64_t max_allocation_;
  bool map_device_;
  VkPhysicalDeviceMemoryProperties props_{};
  mutable std::mutex mutex_;
  std::vector<Block> blocks_;
  MemoryStats stats_;
};

}  // namespace brigade::vk
