// A compute pipeline built from one embedded shader and one set of specialization
// constants. Its descriptor layout (push descriptors, storage buffers only) comes from the
// shader's SPIR-V (storage buffers only, set 0); its push-constant range is the
// device-portable 128 bytes.
#pragma once

#include <volk.h>

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace brigade::vk {

class Device;
struct PhysicalInfo;

inline constexpr uint32_t kMaxPushBytes = 128;  // the minimum every Vulkan device guarantees

struct Specialization {
  std::vector<std::pair<uint32_t, uint32_t>> constants;  // constant_id -> 32-bit value
  // Where the device's driver compiles specialization constants as values read at run time
  // (PhysicalInfo::specialize_on_host), fold these into the SPIR-V on the host first
  // (vk/specialize.h): for kernels whose loops and arrays they size, whose runs repay a
  // slower pipeline creation. For one shader, a function of the constants: a device's kernels
  // are found by those alone.
  bool fold = false;
  // Where not 0, the pipeline requires full subgroups of this size (a kernel that places
  // invocations by subgroup, where the device offers several sizes); the device's
  // DeviceOptions::subgroup_size, where set, wins. Like `fold`, a function of the constants.
  uint32_t subgroup_size = 0;
  Specialization& set(uint32_t id, uint32_t value) {
    constants.emplace_back(id, value);
    return *this;
  }
  std::string key() const;
};

// Throws UserError where a pipeline of `workgroup` cannot be created as asked on `device`: with
// a `required` subgroup size (0: none), more invocations than that size times its
// maxComputeWorkgroupSubgroups; in `full` subgroups, an x that is not a multiple of the
// required size (or, with none, of its largest).
void check_subgroups(const PhysicalInfo& device, const std::string& kernel, const std::array<uint32_t, 3>& workgroup,
                     uint32_t required, bool full);

class Kernel {
 public:
  Kernel(Device& device, const std::string& shader, const Specialization& spec);
  ~Kernel();
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  const std::string& name() const { return name_; }
  VkPipeline pipeline() const { return pipeline_; }
  VkPipelineLayout layout() const { return layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }
  uint32_t bindings() const { return bindings_; }
  bool writes(uint32_t binding) const { return (written_mask_ >> binding) & 1u; }

 private:
  Device& device_;
  std::string name_;
  uint32_t bindings_ = 0, written_mask_ = 0;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
};

}  // namespace brigade::vk
