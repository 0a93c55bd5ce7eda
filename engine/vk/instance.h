// The Vulkan instance: loads Vulkan through Volk, optionally with the Khronos validation
// layer (synchronization validation on), and collects every message it reports.
#pragma once

#include <volk.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "vk/physical.h"

namespace brigade::vk {

struct InstanceOptions {
  bool validation = false;       // VK_LAYER_KHRONOS_validation + debug-utils messenger
  bool sync_validation = true;   // with validation: synchronization validation too
  bool echo_messages = true;     // print each validation message to stderr as it arrives
};

// BRIGADE_VALIDATION=1 in the environment turns validation on for every instance, whatever
// the options say: the end-to-end tests run the program under it this way.
bool validation_from_environment();
// Messages reported by every instance of this process so far.
std::size_t validation_messages_reported();

class Instance {
 public:
  explicit Instance(InstanceOptions options = {});
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  VkInstance handle() const { return instance_; }
  bool validation() const { return options_.validation; }
  bool debug_utils() const { return debug_utils_; }
  const std::vector<VkPhysicalDevice>& physical_devices() const { return physical_; }
  // Every physical device described, in the loader's order (the indices of `brigade devices`).
  std::vector<PhysicalInfo> describe_devices() const;
  // The device `spec` names (see find_device): an index, part of a name or a UUID prefix.
  uint32_t find_device(const std::string& spec, const std::string& what) const;

  // Warnings and errors reported by the validation layer since creation.
  std::size_t message_count() const { return count_.load(); }
  std::vector<std::string> messages() const;

 private:
  static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                   VkDebugUtilsMessageTypeFlagsEXT types,
                                                   const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                   void* self);

  InstanceOptions options_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  bool debug_utils_ = false;
  std::vector<VkPhysicalDevice> physical_;
  std::atomic<std::size_t> count_{0};
  mutable std::mutex mutex_;
  std::vector<std::string> messages_;
};

}  // namespace brigade::vk
