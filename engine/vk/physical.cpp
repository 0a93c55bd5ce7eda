#include "vk/physical.h"

#include <algorithm>
#include <cstdio>

namespace brigade::vk {
namespace {

std::string vendor_name(uint32_t id) {
  switch (id) {
    case 0x10DE: return "NVIDIA";
    case 0x1002: return "AMD";
    case 0x8086: return "Intel";
    case 0x13B5: return "ARM";
    case 0x5143: return "Qualcomm";
    case 0x106B: return "Apple";
    case 0x10005: return "Mesa";
    default: {
      char buf[16];
      std::snprintf(buf, sizeof buf, "0x%04X", id);
      return buf;
    }
  }
}

}  // namespace

std::string uuid_string(const std::array<uint8_t, VK_UUID_SIZE>& uuid) {
  std::string s;
  char buf[4];
  for (size_t i = 0; i < uuid.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    std::snprintf(buf, sizeof buf, "%02x", uuid[i]);
    s += buf;
  }
  return s;
}

std::string PhysicalInfo::type_name() const {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
  }
}

std::string PhysicalInfo::driver_version_string() const {
  char buf[48];
  const uint32_t v = driver_version;
  if (vendor_id == 0x10DE)  // NVIDIA packs 10.8.8.6 bits
    std::snprintf(buf, sizeof buf, "%u.%u.%u", v >> 22, (v >> 14) & 0xFF, (v >> 6) & 0xFF);
  else
    std::snprintf(buf, sizeof buf, "%u.%u.%u", VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v),
                  VK_API_VERSION_PATCH(v));
  return buf;
}

std::string PhysicalInfo::device_uuid_string() const { return uuid_string(device_uuid); }
std::string PhysicalInfo::driver_uuid_string() const { return uuid_string(driver_uuid); }

bool PhysicalInfo::has_extension(const std::string& ext) const {
  return std::find(extensions.begin(), extensions.end(), ext) != extensions.end();
}

PhysicalInfo describe(VkPhysicalDevice device, uint32_t index) {
  PhysicalInfo info;
  info.index = index;
  info.handle = device;

  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(device, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vkEnumerateDeviceExtensionProperties(device, nullptr, &n, exts.data());
  for (auto& e : exts) info.extensions.emplace_back(e.extensionName);

  VkPhysicalDeviceExternalMemoryHostPropertiesEXT host{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
  VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceIDProperties ids{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
  VkPhysicalDeviceMaintenance3Properties m3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props.pNext = &subgroup;
  subgroup.pNext = &driver;
  driver.pNext = &ids;
  ids.pNext = &m3;
  info.external_memory_host = info.has_extension(VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
  if (info.external_memory_host) m3.pNext = &host;
  vkGetPhysicalDeviceProperties2(device, &props);

  const auto& p = props.properties;
  info.name = p.deviceName;
  info.vendor_id = p.vendorID;
  info.vendor = vendor_name(p.vendorID);
  info.type = p.deviceType;
  info.driver_name = driver.driverName;
  info.driver_info = driver.driverInfo;
  info.driver_version = p.driverVersion;
  info.api_version = p.apiVersion;
  std::copy(std::begin(ids.deviceUUID), std::end(ids.deviceUUID), info.device_uuid.begin());
  std::copy(std::begin(ids.driverUUID), std::end(ids.driverUUID), info.driver_uuid.begin());
  info.subgroup_size = subgroup.subgroupSize;
  info.subgroup_arithmetic = (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) &&
                             (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT);
  info.max_storage_buffer_range = p.limits.maxStorageBufferRange;
  info.max_allocation_size = m3.maxMemoryAllocationSize;
  info.max_shared_memory = p.limits.maxComputeSharedMemorySize;
  info.max_workgroup_invocations = p.limits.maxComputeWorkGroupInvocations;
  info.max_push_constants = p.limits.maxPushConstantsSize;
  info.timestamp_period_ns = p.limits.timestampPeriod;
  info.min_imported_host_pointer_alignment = host.minImportedHostPointerAlignment;

  VkPhysicalDeviceMemoryProperties mem;
  vkGetPhysicalDeviceMemoryProperties(device, &mem);
  for (uint32_t i = 0; i < mem.memoryHeapCount; ++i)
    info.heaps.push_back({mem.memoryHeaps[i].size,
                          (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0});

  uint32_t qn = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(device, &qn, nullptr);
  std::vector<VkQueueFamilyProperties> families(qn);
  vkGetPhysicalDeviceQueueFamilyProperties(device, &qn, families.data());
  for (auto& f : families) {
    if ((f.queueFlags & VK_QUEUE_COMPUTE_BIT) && f.timestampValidBits > 0) info.timestamps = true;
    if ((f.queueFlags & VK_QUEUE_TRANSFER_BIT) &&
        !(f.queueFlags & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT)))
      info.dedicated_transfer_queue = true;
  }

  VkPhysicalDeviceTimelineSemaphoreFeatures timeline{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES};
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &timeline;
  vkGetPhysicalDeviceFeatures2(device, &features);
  info.timeline_semaphore = timeline.timelineSemaphore == VK_TRUE;

  info.external_memory_fd = info.has_extension(VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME);
  info.cooperative_matrix = info.has_extension("VK_KHR_cooperative_matrix") ||
                            info.has_extension("VK_NV_cooperative_matrix");
  return info;
}

}  // namespace brigade::vk
