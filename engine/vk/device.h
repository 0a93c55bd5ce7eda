// One Vulkan logical device: the engine's unit of a pipeline stage. Each has its own Volk
// device table (several devices live in one process), a compute queue, a queue timeline,
// an allocator and a kernel cache.
#pragma once

#include <volk.h>

#include <cstdint>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vk/memory.h"
#include "vk/physical.h"

namespace brigade::vk {

class Instance;
class Kernel;
struct Fault;
struct Specialization;

struct DeviceOptions {
  std::string label;      // e.g. "stage 1"; used in debug names and error messages
  uint64_t mem_limit = 0; // bytes; 0 = no cap
  // Every kernel of this device runs with this subgroup size (one of subgroup_sizes() of
  // the device); 0 = the driver's choice. Tests use it to run each kernel under every size.
  uint32_t subgroup_size = 0;
  // Fold every kernel's specialization constants into its SPIR-V on the host, as on drivers
  // that need it (PhysicalInfo::specialize_on_host), on this device too. Tests use it.
  bool specialize_on_host = false;
  // Where not 0 and below the device's maxStorageBufferRange, this device takes it for that
  // limit (PhysicalInfo::max_storage_buffer_range): tests use it to bind arenas in windows
  // without allocating past lavapipe's 128 MiB.
  uint64_t max_binding = 0;
};

struct SemaphoreValue {
  VkSemaphore semaphore = VK_NULL_HANDLE;
  uint64_t value = 0;
};

class Device {
 public:
  Device(Instance& instance, uint32_t physical_index, DeviceOptions options = {});
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // Device-level Vulkan functions of this device: call as dev.vk().vkCreateBuffer(...).
  const VolkDeviceTable& vk() const { return table_; }
  VkDevice handle() const { return device_; }
  const PhysicalInfo& info() const { return info_; }
  Instance& instance() const { return instance_; }
  // "device 0 (stage 1, llvmpipe ...)": how errors name this device.
  const std::string& label() const { return label_; }
  Allocator& memory() { return *memory_; }
  const Allocator& memory() const { return *memory_; }
  // Held by a copy through staging memory (vk::upload, vk::download): one staging buffer on
  // the device at a time, as the plan counts.
  std::mutex& staging_mutex() { return staging_mutex_; }

  uint32_t compute_family() const { return compute_family_; }
  // Whether memory can be exchanged with VK_QUEUE_FAMILY_FOREIGN_EXT: any queue, whatever its
  // device or driver (VK_EXT_queue_family_foreign, enabled where listed).
  bool foreign_queues() const { return foreign_queues_; }
  // Its timestamp counter (raw ticks) and CLOCK_MONOTONIC (ns) read together, where the device
  // can (PhysicalInfo::calibrated_timestamps): no submission, nothing queued.
  void calibrated_clocks(uint64_t& device_ticks, uint64_t& host_ns) const;
  bool has_transfer_queue() const { return transfer_queue_ != VK_NULL_HANDLE; }
  uint32_t transfer_family() const { return transfer_family_; }

  // Gives a Vulkan object a debug name (seen in validation messages and GPU debuggers).
  void name(VkObjectType type, uint64_t handle, const std::string& name) const;
  template <class H>
  void name(VkObjectType type, H handle, const std::string& n) const {
    name(type, reinterpret_cast<uint64_t>(handle), n);
  }

  // Submits to the compute queue; waits and signals are timeline semaphores. Also signals
  // the queue's own timeline and returns the value that marks this submission complete.
  uint64_t submit(VkCommandBuffer cmd, const std::vector<SemaphoreValue>& waits = {},
                  const std::vector<SemaphoreValue>& signals = {});
  // Blocks until the queue timeline reaches `value`. A failed submission or wait (device
  // lost and the like) throws VulkanError naming this device.
  void wait(uint64_t value);
  // The same with a timeout; false when it expires first.
  bool wait_for(uint64_t value, uint64_t timeout_ns);
  // For teardown: waits up to `timeout_ns` for everything submitted so far to finish, so
  // that what it uses can be freed. A lost device, or work waiting for a signal no one will
  // send, is not waited for past the timeout. Never throws.
  void settle(uint64_t timeout_ns) noexcept;
  VkSemaphore queue_timeline() const { return queue_timeline_; }
  // Whether a submit or wait found the device lost (VK_ERROR_DEVICE_LOST): nothing more runs
  // on it.
  bool lost() const { return lost_; }
  // Where the pipeline begins an action ("forward", "backward", "step", "send", "capture"): a fault
  // injected there (BRIGADE_FAULT, device.cpp) loses the device now.
  void begin_action(const char* action);
  // The value of the latest submission: the queue has nothing left to do once it reaches it.
  uint64_t submitted();
  // The subgroup size every kernel must run with (DeviceOptions, where the device runs
  // several), or 0.
  uint32_t required_subgroup_size() const { return required_subgroup_size_; }

  // The compute pipeline of a shader from shaders/, built once per specialization. A lookup
  // makes no string: every dispatch of a recording asks for its kernel.
  const Kernel& kernel(std::string_view shader, const Specialization& spec);
  const Kernel& kernel(std::string_view shader);

 private:
  Instance& instance_;
  PhysicalInfo info_;
  std::string label_;
  VkDevice device_ = VK_NULL_HANDLE;
  VolkDeviceTable table_{};
  uint32_t compute_family_ = 0, transfer_family_ = 0;
  VkQueue compute_queue_ = VK_NULL_HANDLE, transfer_queue_ = VK_NULL_HANDLE;
  std::mutex queue_mutex_;
  VkSemaphore queue_timeline_ = VK_NULL_HANDLE;
  uint64_t submitted_ = 0;
  uint32_t required_subgroup_size_ = 0;
  bool poll_timeline_ = false;  // wait_for polls the queue timeline (SwiftShader, see there)
  // Fault injection (BRIGADE_FAULT, device.cpp): the fault armed for this device, if any. When
  // it fires, that submission or action fails with VK_ERROR_DEVICE_LOST, and every later
  // submit or wait as well, as after a real loss. Tests use it; nothing else sets it.
  const Fault* fault_ = nullptr;
  uint64_t fault_actions_ = 0;
  mutable std::atomic<bool> lost_{false};  // set by fail() too, which a const wait may call
  void lose_injected();  // with queue_mutex_ held
  [[noreturn]] void fail(VkResult r, const char* call, int line) const;
  std::unique_ptr<Allocator> memory_;
  std::mutex kernel_mutex_;
  std::mutex staging_mutex_;
  bool foreign_queues_ = false;
  // By shader and specialization constants; found by a (shader, constants) pair of views.
  using Constants = std::vector<std::pair<uint32_t, uint32_t>>;  // Specialization::constants
  using KernelKey = std::pair<std::string, Constants>;
  using KernelProbe = std::pair<std::string_view, const Constants*>;
  struct KernelLess {
    using is_transparent = void;
    static bool less(std::string_view as, const Constants& ac, std::string_view bs, const Constants& bc) {
      if (const int c = as.compare(bs)) return c < 0;
      return ac < bc;
    }
    bool operator()(const KernelKey& a, const KernelKey& b) const { return less(a.first, a.second, b.first, b.second); }
    bool operator()(const KernelKey& a, const KernelProbe& b) const { return less(a.first, a.second, b.first, *b.second); }
    bool operator()(const KernelProbe& a, const KernelKey& b) const { return less(a.first, *a.second, b.first, b.second); }
  };
  std::map<KernelKey, std::unique_ptr<Kernel>, KernelLess> kernels_;
};

// A timeline semaphore owned by one device.
class Timeline {
 public:
  Timeline(Device& device, const std::string& name, uint64_t initial = 0);
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  VkSemaphore handle() const { return semaphore_; }
  SemaphoreValue at(uint64_t value) const { return {semaphore_, value}; }
  uint64_t value() const;                 // current counter value
  void signal(uint64_t value);            // host-side signal
  // Host-side wait; false on timeout.
  bool wait(uint64_t value, uint64_t timeout_ns = UINT64_MAX) const;

 private:
  Device& device_;
  VkSemaphore semaphore_ = VK_NULL_HANDLE;
};

}  // namespace brigade::vk
