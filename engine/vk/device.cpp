#include "vk/device.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "vk/check.h"
#include "vk/specialize.h"
#include "vk/instance.h"
#include "vk/kernel.h"

namespace brigade::vk {

struct Fault {
  std::string label, action;
  uint64_t n = 0;
};

namespace {

// BRIGADE_FAULT: faults separated by ';', each "device-lost:LABEL:N" (the Nth submission of
// the device labelled LABEL) or "device-lost:LABEL:ACTION:N" (the Nth time that device begins
// a pipeline action of that kind: forward, backward, step or send; or capture, a copy of its
// parameters and optimizer state to the host, as for a checkpoint). Each fault is armed once
// the one before it has fired, in devices made from then on: "device-lost:stage 1:backward:3;
// device-lost:stage 0:2" loses stage 1 in its third backward and then, in the pipeline built
// after that loss, stage 0 at its second submission.

const std::vector<Fault>& faults() {
  static const std::vector<Fault> parsed = [] {
    std::vector<Fault> out;
    const char* spec = std::getenv("BRIGADE_FAULT");
    if (!spec || !*spec) return out;
    const std::string all = spec, kind = "device-lost:";
    for (size_t from = 0; from <= all.size();) {
      const size_t semi = std::min(all.find(';', from), all.size());
      const std::string s = all.substr(from, semi - from);
      from = semi + 1;
      const size_t colon = s.rfind(':');
      char* end = nullptr;
      const uint64_t n = colon == std::string::npos ? 0 : std::strtoull(s.c_str() + colon + 1, &end, 10);
      if (s.rfind(kind, 0) != 0 || colon < kind.size() || n == 0 || *end)
        throw UserError("BRIGADE_FAULT: '" + s + "' is not a fault; expected device-lost:LABEL:N or "
                        "device-lost:LABEL:ACTION:N, e.g. device-lost:stage 1:12");
      Fault f{s.substr(kind.size(), colon - kind.size()), "", n};
      const size_t inner = f.label.rfind(':');
      if (inner != std::string::npos) {
        f.action = f.label.substr(inner + 1), f.label.resize(inner);
        if (f.action != "forward" && f.action != "backward" && f.action != "step" && f.action != "send" &&
            f.action != "capture")
          throw UserError("BRIGADE_FAULT: '" + f.action +
                          "' is not an action; expected forward, backward, step, send or capture");
      }
      out.push_back(f);
    }
    return out;
  }();
  return parsed;
}

std::atomic<size_t> g_faults_fired{0};

}  // namespace

Device::Device(Instance& instance, uint32_t index, DeviceOptions options) : instance_(instance) {
  const auto& physical = instance.physical_devices();
  if (index >= physical.size())
    throw UserError("`devices`: index " + std::to_string(index) + " does not exist; this machine has " +
                    std::to_string(physical.size()) + " Vulkan device(s) (see `brigade devices`)");
  info_ = describe(physical[index], index);
  label_ = "device " + std::to_string(index) + " (" +
           (options.label.empty() ? "" : options.label + ", ") + info_.name + ")";
  if (info_.api_version < VK_API_VERSION_1_2 || !info_.timeline_semaphore || !info_.subgroup_arithmetic)
    throw UserError(label_ + " lacks what Brigade needs: Vulkan 1.2 with timeline semaphores and "
                    "subgroup arithmetic in compute shaders");

  uint32_t qn = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(info_.handle, &qn, nullptr);
  std::vector<VkQueueFamilyProperties> families(qn);
  vkGetPhysicalDeviceQueueFamilyProperties(info_.handle, &qn, families.data());
  const int compute = info_.compute_family;
  int transfer = -1;
  for (uint32_t i = 0; i < qn; ++i) {
    const auto f = families[i].queueFlags;
    if ((f & VK_QUEUE_TRANSFER_BIT) && !(f & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT)) &&
        transfer < 0)
      transfer = int(i);
  }
  if (compute < 0) throw UserError(label_ + " has no compute queue");
  compute_family_ = uint32_t(compute);

  const float priority = 1.0f;
  std::vector<VkDeviceQueueCreateInfo> queues;
  VkDeviceQueueCreateInfo q{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  q.queueFamilyIndex = compute_family_;
  q.queueCount = 1;
  q.pQueuePriorities = &priority;
  queues.push_back(q);
  if (transfer >= 0) {
    transfer_family_ = uint32_t(transfer);
    q.queueFamilyIndex = transfer_family_;
    queues.push_back(q);
  }

  if (options.specialize_on_host) {
    BRIGADE_EXPECT(folds_on_host(), "a device folding specialization constants in a build without the SPIR-V optimizer");
    info_.specialize_on_host = true;
  }
  if (options.max_binding) info_.max_storage_buffer_range = std::min(info_.max_storage_buffer_range, options.max_binding);
  if (options.subgroup_size) {
    const auto sizes = subgroup_sizes(info_);
    if (std::find(sizes.begin(), sizes.end(), options.subgroup_size) == sizes.end())
      throw UserError(label_ + " cannot run compute kernels with subgroups of " +
                      std::to_string(options.subgroup_size) + " (it offers " +
                      std::to_string(sizes.front()) + " to " + std::to_string(sizes.back()) + ")");
    info_.subgroup_size = options.subgroup_size;  // what the launchers size workgroups by
    // Required only where the device runs several sizes: one it always runs needs no
    // requiring (and a 256-invocation workgroup required in subgroups of 4 would pass a
    // device's maxComputeWorkgroupSubgroups of 32, as a 128-bit lavapipe's).
    if (info_.min_subgroup_size != info_.max_subgroup_size) required_subgroup_size_ = options.subgroup_size;
    // The matrix kernels' warps too: every kernel runs in subgroups of this size.
    if (info_.matrix_units.full_subgroups) info_.matrix_units.lanes = options.subgroup_size;
  }

  std::vector<const char*> extensions;
  if (info_.external_memory_fd) extensions.push_back(VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME);
  if (info_.external_memory_host) extensions.push_back(VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
  if (info_.calibrated_timestamps) extensions.push_back(VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME);
  foreign_queues_ = info_.has_extension(VK_EXT_QUEUE_FAMILY_FOREIGN_EXTENSION_NAME);
  if (foreign_queues_) extensions.push_back(VK_EXT_QUEUE_FAMILY_FOREIGN_EXTENSION_NAME);

  VkPhysicalDeviceVulkan12Features v12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  v12.timelineSemaphore = VK_TRUE;
  VkPhysicalDeviceSubgroupSizeControlFeatures size_control{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
  // The cooperative-matrix kernels run in full subgroups (vk::ShaderInterface::full_subgroups),
  // of a size their pipelines require where the device offers several (vk::fit_matrix_units);
  // so does the register kernel's subgroup-sharing tiling (Specialization::subgroup_size).
  size_control.subgroupSizeControl = info_.subgroup_size_control ? VK_TRUE : VK_FALSE;
  size_control.computeFullSubgroups = info_.full_subgroups ? VK_TRUE : VK_FALSE;
  if (size_control.subgroupSizeControl || size_control.computeFullSubgroups) {
    v12.pNext = &size_control;
    extensions.push_back(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  }
  // Matrix units where the device lists them (the cooperative-matrix kernels declare fp16
  // and the Vulkan memory model).
  MatrixUnitFeatures matrix(info_.matrix_units);
  if (info_.matrix_units.usable()) {
    v12.shaderFloat16 = VK_TRUE;
    v12.vulkanMemoryModel = v12.vulkanMemoryModelDeviceScope = VK_TRUE;
    extensions.insert(extensions.end(), matrix.extensions.begin(), matrix.extensions.end());
  }
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = matrix.chain(&v12);

  VkDeviceCreateInfo info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  info.pNext = &features;
  info.queueCreateInfoCount = uint32_t(queues.size());
  info.pQueueCreateInfos = queues.data();
  info.enabledExtensionCount = uint32_t(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  VK_CHECK(vkCreateDevice(info_.handle, &info, nullptr, &device_));
  volkLoadDeviceTable(&table_, device_);

  table_.vkGetDeviceQueue(device_, compute_family_, 0, &compute_queue_);
  if (transfer >= 0) table_.vkGetDeviceQueue(device_, transfer_family_, 0, &transfer_queue_);
  name(VK_OBJECT_TYPE_DEVICE, device_, label_);
  name(VK_OBJECT_TYPE_QUEUE, compute_queue_, label_ + " compute queue");
  if (transfer_queue_) name(VK_OBJECT_TYPE_QUEUE, transfer_queue_, label_ + " transfer queue");

  VkSemaphoreTypeCreateInfo type{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
  type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  VkSemaphoreCreateInfo sem{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
  sem.pNext = &type;
  VK_CHECK(table_.vkCreateSemaphore(device_, &sem, nullptr, &queue_timeline_));
  name(VK_OBJECT_TYPE_SEMAPHORE, queue_timeline_, label_ + " queue timeline");

  memory_ = std::make_unique<Allocator>(table_, device_, info_.handle, label_,
                                        info_.max_allocation_size, options.mem_limit, info_.device_memory_mapped);
  if (const size_t armed = g_faults_fired; armed < faults().size() && faults()[armed].label == options.label)
    fault_ = &faults()[armed];
  poll_timeline_ = info_.driver_id == VK_DRIVER_ID_GOOGLE_SWIFTSHADER;
}

void Device::fail(VkResult r, const char* call, int line) const {
  // A loss first seen by a wait (a GPU hang surfaces there) is a loss as a failed submit's is.
  if (r == VK_ERROR_DEVICE_LOST) lost_ = true;
  throw VulkanError(label_ + ": " + failure_text(r, call, __FILE__, line), r);
}

Device::~Device() {
  if (!device_) return;
  table_.vkDeviceWaitIdle(device_);
  kernels_.clear();
  memory_.reset();
  table_.vkDestroySemaphore(device_, queue_timeline_, nullptr);
  table_.vkDestroyDevice(device_, nullptr);
}

void Device::name(VkObjectType type, uint64_t handle, const std::string& n) const {
  if (!instance_.debug_utils()) return;
  VkDebugUtilsObjectNameInfoEXT info{VK_STRUCTURE_TYPE_DEBUG_UTILS_OBJECT_NAME_INFO_EXT};
  info.objectType = type;
  info.objectHandle = handle;
  info.pObjectName = n.c_str();
  VK_CHECK(vkSetDebugUtilsObjectNameEXT(device_, &info));
}

void Device::calibrated_clocks(uint64_t& device_ticks, uint64_t& host_ns) const {
  BRIGADE_EXPECT(info_.calibrated_timestamps, "a device that reads its clock with the host's");
  VkCalibratedTimestampInfoEXT domains[2] = {{VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT},
                                             {VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT}};
  domains[0].timeDomain = VK_TIME_DOMAIN_DEVICE_EXT;
  domains[1].timeDomain = VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT;
  uint64_t values[2] = {0, 0}, deviation = 0;
  const VkResult r = table_.vkGetCalibratedTimestampsEXT(device_, 2, domains, values, &deviation);
  if (r != VK_SUCCESS) fail(r, "vkGetCalibratedTimestampsEXT", __LINE__);
  device_ticks = values[0], host_ns = values[1];
}

uint64_t Device::submit(VkCommandBuffer cmd, const std::vector<SemaphoreValue>& waits,
                        const std::vector<SemaphoreValue>& signals) {
  std::lock_guard lock(queue_mutex_);
  std::vector<VkSemaphore> wait_sems, signal_sems;
  std::vector<uint64_t> wait_values, signal_values;
  std::vector<VkPipelineStageFlags> stages;
  for (auto& w : waits) {
    wait_sems.push_back(w.semaphore);
    wait_values.push_back(w.value);
    stages.push_back(VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
  }
  for (auto& s : signals) {
    signal_sems.push_back(s.semaphore);
    signal_values.push_back(s.value);
  }
  if (!lost_ && fault_ && fault_->action.empty() && submitted_ + 1 == fault_->n) lose_injected();
  if (lost_) fail(VK_ERROR_DEVICE_LOST, "vkQueueSubmit", __LINE__);
  const uint64_t done = ++submitted_;
  signal_sems.push_back(queue_timeline_);
  signal_values.push_back(done);

  VkTimelineSemaphoreSubmitInfo timeline{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
  timeline.waitSemaphoreValueCount = uint32_t(wait_values.size());
  timeline.pWaitSemaphoreValues = wait_values.data();
  timeline.signalSemaphoreValueCount = uint32_t(signal_values.size());
  timeline.pSignalSemaphoreValues = signal_values.data();
  VkSubmitInfo info{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  info.pNext = &timeline;
  info.waitSemaphoreCount = uint32_t(wait_sems.size());
  info.pWaitSemaphores = wait_sems.data();
  info.pWaitDstStageMask = stages.data();
  info.commandBufferCount = cmd ? 1 : 0;
  info.pCommandBuffers = &cmd;
  info.signalSemaphoreCount = uint32_t(signal_sems.size());
  info.pSignalSemaphores = signal_sems.data();
  if (const VkResult r = table_.vkQueueSubmit(compute_queue_, 1, &info, VK_NULL_HANDLE); r != VK_SUCCESS) {
    lost_ = lost_ || r == VK_ERROR_DEVICE_LOST;
    --submitted_;
    fail(r, "vkQueueSubmit", __LINE__);
  }
  return done;
}

void Device::begin_action(const char* action) {
  if (!fault_ || fault_->action != action) return;
  std::lock_guard lock(queue_mutex_);
  if (++fault_actions_ < fault_->n) return;
  lose_injected();
  fail(VK_ERROR_DEVICE_LOST, "vkQueueSubmit", __LINE__);
}

void Device::lose_injected() {
  // Lets the work already queued finish first, so that from here on the device runs nothing,
  // as a lost one would. (Queued work never waits on another device.)
  VkSemaphoreWaitInfo idle{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
  idle.semaphoreCount = 1;
  idle.pSemaphores = &queue_timeline_;
  idle.pValues = &submitted_;
  table_.vkWaitSemaphores(device_, &idle, 10'000'000'000ull);
  lost_ = true, fault_ = nullptr, ++g_faults_fired;
}

uint64_t Device::submitted() {
  std::lock_guard lock(queue_mutex_);
  return submitted_;
}

void Device::wait(uint64_t value) { wait_for(value, UINT64_MAX); }

bool Device::wait_for(uint64_t value, uint64_t timeout_ns) {
  if (lost_) fail(VK_ERROR_DEVICE_LOST, "vkWaitSemaphores", __LINE__);
  if (poll_timeline_) {
    // SwiftShader's vkWaitSemaphores on a timeline could sleep through the signal of a
    // submission that completed (seen once in a few mixed-vendor runs: the queue idle, the
    // waiter asleep for good), so on it the host polls the counter instead.
    const auto start = std::chrono::steady_clock::now();
    for (uint32_t spins = 0;; ++spins) {
      uint64_t reached = 0;
      const VkResult r = table_.vkGetSemaphoreCounterValue(device_, queue_timeline_, &reached);
      if (r != VK_SUCCESS) fail(r, "vkGetSemaphoreCounterValue", __LINE__);
      if (reached >= value) return true;
      if (timeout_ns != UINT64_MAX &&
          uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count()) >= timeout_ns)
        return false;
      std::this_thread::sleep_for(std::chrono::microseconds(spins < 100 ? 20 : 200));
    }
  }
  VkSemaphoreWaitInfo info{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
  info.semaphoreCount = 1;
  info.pSemaphores = &queue_timeline_;
  info.pValues = &value;
  const VkResult r = table_.vkWaitSemaphores(device_, &info, timeout_ns);
  if (r == VK_TIMEOUT) return false;
  if (r != VK_SUCCESS) fail(r, "vkWaitSemaphores", __LINE__);
  return true;
}

void Device::settle(uint64_t timeout_ns) noexcept {
  try {
    if (!lost_) wait_for(submitted_, timeout_ns);
  } catch (const std::exception&) {
    // a failed wait: nothing more to wait for
  }
}

const Kernel& Device::kernel(std::string_view shader) { return kernel(shader, Specialization{}); }

const Kernel& Device::kernel(std::string_view shader, const Specialization& spec) {
  std::lock_guard lock(kernel_mutex_);
  auto it = kernels_.find(KernelProbe{shader, &spec.constants});
  if (it == kernels_.end())
    it = kernels_
             .emplace(KernelKey{std::string(shader), spec.constants},
                      std::make_unique<Kernel>(*this, std::string(shader), spec))
             .first;
  return *it->second;
}

Timeline::Timeline(Device& device, const std::string& name, uint64_t initial) : device_(device) {
  VkSemaphoreTypeCreateInfo type{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
  type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  type.initialValue = initial;
  VkSemaphoreCreateInfo info{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
  info.pNext = &type;
  VK_CHECK(device.vk().vkCreateSemaphore(device.handle(), &info, nullptr, &semaphore_));
  device.name(VK_OBJECT_TYPE_SEMAPHORE, semaphore_, name);
}

Timeline::~Timeline() { device_.vk().vkDestroySemaphore(device_.handle(), semaphore_, nullptr); }

uint64_t Timeline::value() const {
  uint64_t v = 0;
  VK_CHECK(device_.vk().vkGetSemaphoreCounterValue(device_.handle(), semaphore_, &v));
  return v;
}

void Timeline::signal(uint64_t value) {
  VkSemaphoreSignalInfo info{VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO};
  info.semaphore = semaphore_;
  info.value = value;
  VK_CHECK(device_.vk().vkSignalSemaphore(device_.handle(), &info));
}

bool Timeline::wait(uint64_t value, uint64_t timeout_ns) const {
  VkSemaphoreWaitInfo info{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
  info.semaphoreCount = 1;
  info.pSemaphores = &semaphore_;
  info.pValues = &value;
  VkResult r = device_.vk().vkWaitSemaphores(device_.handle(), &info, timeout_ns);
  if (r == VK_TIMEOUT) return false;
  VK_CHECK(r);
  return true;
}

}  // namespace brigade::vk
