#include "vk/physical.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <utility>

#include "util/env.h"
#include "vk/check.h"
#include "vk/memory.h"
#include "vk/specialize.h"

namespace brigade::vk {
namespace {

std::string vendor_name(uint32_t id) {
  switch (id) {
    // PCI vendor IDs
    case 0x10DE: return "NVIDIA";
    case 0x1002: return "AMD";
    case 0x1022: return "AMD";
    case 0x8086: return "Intel";
    case 0x13B5: return "ARM";
    case 0x5143: return "Qualcomm";
    case 0x106B: return "Apple";
    case 0x1AE0: return "Google";
    case 0x1010: return "Imagination";
    case 0x144D: return "Samsung";
    case 0x1414: return "Microsoft";
    case 0x14E4: return "Broadcom";
    case 0x1D17: return "Zhaoxin";
    // Khronos vendor IDs (VkVendorId) of vendors without a PCI ID
    case 0x10001: return "Vivante";
    case 0x10002: return "VeriSilicon";
    case 0x10003: return "Kazan";
    case 0x10004: return "Codeplay";
    case 0x10005: return "Mesa";
    case 0x10006: return "PoCL";
    case 0x10007: return "MoltenVK";
    default: {
      char buf[16];
      std::snprintf(buf, sizeof buf, "0x%04X", id);
      return buf;
    }
  }
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
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

  // Chain only the structures this device knows, by its API version and extensions: a
  // driver may complain (SwiftShader prints a line to stderr) about any other.
  VkPhysicalDeviceProperties plain;
  vkGetPhysicalDeviceProperties(device, &plain);
  const uint32_t api = plain.apiVersion;
  const bool v11 = api >= VK_API_VERSION_1_1, v12 = api >= VK_API_VERSION_1_2;
  // Brigade's instance asks for Vulkan 1.2, so features of 1.3 come through their extensions.
  const bool size_control = info.has_extension(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  info.external_memory_host = info.has_extension(VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);

  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  VkPhysicalDeviceExternalMemoryHostPropertiesEXT host{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
  VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceIDProperties ids{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
  VkPhysicalDeviceMaintenance3Properties m3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceSubgroupSizeControlProperties sizes{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES};
  VkPhysicalDevicePCIBusInfoPropertiesEXT pci{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT};
  const bool on_pci = info.has_extension(VK_EXT_PCI_BUS_INFO_EXTENSION_NAME);
  void** tail = &props.pNext;
  auto chain = [&tail](auto& s) {
    *tail = &s;
    tail = &s.pNext;
  };
  if (v11) chain(subgroup), chain(ids), chain(m3);
  if (v12 || info.has_extension(VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME)) chain(driver);
  if (info.external_memory_host) chain(host);
  if (size_control) chain(sizes);
  if (on_pci) chain(pci);
  vkGetPhysicalDeviceProperties2(device, &props);

  const auto& p = props.properties;
  info.name = p.deviceName;
  info.vendor_id = p.vendorID;
  info.vendor = vendor_name(p.vendorID);
  info.driver_id = driver.driverID;
  info.specialize_on_host = driver.driverID == VK_DRIVER_ID_GOOGLE_SWIFTSHADER && folds_on_host();
  info.type = p.deviceType;
  info.driver_name = driver.driverName;
  info.driver_info = driver.driverInfo;
  info.driver_version = p.driverVersion;
  info.api_version = p.apiVersion;
  std::copy(std::begin(ids.deviceUUID), std::end(ids.deviceUUID), info.device_uuid.begin());
  std::copy(std::begin(ids.driverUUID), std::end(ids.driverUUID), info.driver_uuid.begin());
  if (on_pci) {
    char bus[32];
    std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.%x", pci.pciDomain, pci.pciBus, pci.pciDevice, pci.pciFunction);
    info.pci_bus = bus;
  }
  info.subgroup_size = subgroup.subgroupSize;
  info.subgroup_arithmetic = (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) &&
                             (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT);
  info.max_storage_buffer_range = p.limits.maxStorageBufferRange;
  info.min_storage_offset_alignment = p.limits.minStorageBufferOffsetAlignment;
  info.max_allocation_size = m3.maxMemoryAllocationSize;
  info.max_shared_memory = p.limits.maxComputeSharedMemorySize;
  info.max_workgroup_invocations = p.limits.maxComputeWorkGroupInvocations;
  for (int i = 0; i < 3; ++i) info.max_workgroup_count[size_t(i)] = p.limits.maxComputeWorkGroupCount[i];
  info.max_push_constants = p.limits.maxPushConstantsSize;
  info.timestamp_period_ns = p.limits.timestampPeriod;
  info.min_imported_host_pointer_alignment = host.minImportedHostPointerAlignment;

  VkPhysicalDeviceMemoryProperties2 mem2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
  VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
  const bool budgets = v11 && info.has_extension(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  if (budgets) mem2.pNext = &budget;
  if (v11)
    vkGetPhysicalDeviceMemoryProperties2(device, &mem2);
  else
    vkGetPhysicalDeviceMemoryProperties(device, &mem2.memoryProperties);
  const VkPhysicalDeviceMemoryProperties& mem = mem2.memoryProperties;
  for (uint32_t i = 0; i < mem.memoryHeapCount; ++i)
    info.heaps.push_back({mem.memoryHeaps[i].size, (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0,
                          budgets ? budget.heapBudget[i] : 0});
  static const bool unmapped = env_choice("BRIGADE_DEVICE_MEMORY", {"auto", "unmapped"}) == "unmapped";
  info.device_memory_mapped = !unmapped && maps_device_memory(mem);

  uint32_t qn = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(device, &qn, nullptr);
  std::vector<VkQueueFamilyProperties> families(qn);
  vkGetPhysicalDeviceQueueFamilyProperties(device, &qn, families.data());
  for (uint32_t i = 0; i < qn; ++i) {
    const VkQueueFlags q = families[i].queueFlags;
    // Prefer a compute family without graphics (async compute on discrete GPUs).
    if ((q & VK_QUEUE_COMPUTE_BIT) && (info.compute_family < 0 || !(q & VK_QUEUE_GRAPHICS_BIT)))
      info.compute_family = int(i);
  }
  if (info.compute_family >= 0) info.timestamp_valid_bits = families[size_t(info.compute_family)].timestampValidBits;
  info.timestamps = info.timestamp_valid_bits > 0;
  for (auto& f : families) {
    if ((f.queueFlags & VK_QUEUE_TRANSFER_BIT) &&
        !(f.queueFlags & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT)))
      info.dedicated_transfer_queue = true;
  }

  VkPhysicalDeviceTimelineSemaphoreFeatures timeline{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES};
  VkPhysicalDeviceSubgroupSizeControlFeatures size_features{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  tail = &features.pNext;
  if (v12 || info.has_extension(VK_KHR_TIMELINE_SEMAPHORE_EXTENSION_NAME)) chain(timeline);
  if (size_control) chain(size_features);
  vkGetPhysicalDeviceFeatures2(device, &features);
  info.timeline_semaphore = timeline.timelineSemaphore == VK_TRUE;
  info.subgroup_size_control = size_features.subgroupSizeControl == VK_TRUE &&
                               (sizes.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                               sizes.minSubgroupSize > 0;
  const bool range = size_control && sizes.minSubgroupSize > 0 && sizes.maxSubgroupSize >= sizes.minSubgroupSize;
  info.min_subgroup_size = range ? sizes.minSubgroupSize : info.subgroup_size;
  info.max_subgroup_size = range ? sizes.maxSubgroupSize : info.subgroup_size;
  info.full_subgroups = size_features.computeFullSubgroups == VK_TRUE;
  info.max_compute_workgroup_subgroups = size_control ? sizes.maxComputeWorkgroupSubgroups : 0;

  info.external_memory_fd = info.has_extension(VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME);
  if (info.has_extension(VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME) && vkGetPhysicalDeviceCalibrateableTimeDomainsEXT) {
    uint32_t count = 0;
    vkGetPhysicalDeviceCalibrateableTimeDomainsEXT(device, &count, nullptr);
    std::vector<VkTimeDomainEXT> domains(count);
    vkGetPhysicalDeviceCalibrateableTimeDomainsEXT(device, &count, domains.data());
    const auto has = [&](VkTimeDomainEXT d) { return std::find(domains.begin(), domains.end(), d) != domains.end(); };
    info.calibrated_timestamps = info.timestamps && has(VK_TIME_DOMAIN_DEVICE_EXT) && has(VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT);
  }
  info.cooperative_matrix = info.has_extension("VK_KHR_cooperative_matrix") ||
                            info.has_extension("VK_NV_cooperative_matrix");
  info.matrix_units = describe_matrix_units(device, info.extensions);
  fit_matrix_units(info);
  return info;
}

std::vector<uint32_t> subgroup_sizes(const PhysicalInfo& device) {
  if (!device.subgroup_size_control) return {device.subgroup_size};
  std::vector<uint32_t> out;
  for (uint32_t s = 1; s <= device.max_subgroup_size && s != 0; s *= 2)
    if (s >= device.min_subgroup_size) out.push_back(s);
  return out;
}

std::vector<uint32_t> devices_with_uuid(const std::vector<PhysicalInfo>& devices, const std::string& uuid) {
  std::vector<uint32_t> out;
  for (const PhysicalInfo& d : devices)
    if (d.device_uuid_string() == lower(uuid)) out.push_back(d.index);
  return out;
}

std::string device_listing(const std::vector<PhysicalInfo>& devices) {
  std::string s;
  for (const PhysicalInfo& d : devices)
    s += (s.empty() ? "" : "; ") + std::to_string(d.index) + " " + d.name + " (" + d.device_uuid_string() + ")";
  return s.empty() ? std::string("none") : s;
}

uint32_t find_device(const std::vector<PhysicalInfo>& devices, const std::string& spec,
                     const std::string& what) {
  const auto listing = [&] { return device_listing(devices); };
  if (spec.empty()) throw UserError(what + ": an empty device name; devices: " + listing());
  if (std::all_of(spec.begin(), spec.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    const unsigned long index = spec.size() > 9 ? ~0ul : std::stoul(spec);
    if (index < devices.size()) return uint32_t(index);
    throw UserError(what + ": device " + spec + " does not exist; this machine has " +
                    std::to_string(devices.size()) + ": " + listing());
  }
  const std::string needle = lower(spec);
  std::string hex;  // the spec as a UUID prefix, without dashes
  for (char c : needle)
    if (c != '-') hex += c;
  const bool is_hex = std::all_of(hex.begin(), hex.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
  std::vector<uint32_t> by_name, by_uuid;
  for (const PhysicalInfo& d : devices) {
    if (lower(d.name).find(needle) != std::string::npos) by_name.push_back(d.index);
    std::string uuid;
    for (char c : d.device_uuid_string())
      if (c != '-') uuid += c;
    if (is_hex && uuid.rfind(hex, 0) == 0) by_uuid.push_back(d.index);
  }
  const std::vector<uint32_t>& found = by_name.empty() ? by_uuid : by_name;
  if (found.size() == 1) return found[0];
  // The checkout's SwiftShader is a driver the loader lists only when told (docs/DRIVERS.md).
  const char* added = std::getenv("VK_ADD_DRIVER_FILES");
  const std::string swiftshader = needle.find("swiftshader") != std::string::npos &&
                                          (!added || !std::strstr(added, "swiftshader"))
                                      ? " (SwiftShader is listed where VK_ADD_DRIVER_FILES names its "
                                        ".drivers/swiftshader/vk_swiftshader_icd.json)"
                                      : "";
  if (found.empty() && is_hex && hex.size() == 2 * VK_UUID_SIZE)
    throw UserError(what + ": no device has deviceUUID " + spec + "; devices: " + listing());
  if (found.empty())
    throw UserError(what + ": no device's name contains '" + spec + "' and no deviceUUID starts with it; devices: " +
                    listing() + swiftshader);
  throw UserError(what + ": '" + spec + "' names " + std::to_string(found.size()) +
                  " devices; give more of a name, a UUID prefix or an index; devices: " + listing());
}

bool same_gpu(const PhysicalInfo& a, const PhysicalInfo& b) { return !a.pci_bus.empty() && a.pci_bus == b.pci_bus; }

uint32_t gpu_of(const std::vector<PhysicalInfo>& devices, uint32_t index) {
  const auto it = std::find_if(devices.begin(), devices.end(), [&](const PhysicalInfo& d) { return d.index == index; });
  uint32_t first = index;
  if (it != devices.end())
    for (const PhysicalInfo& d : devices)
      if (same_gpu(d, *it)) first = std::min(first, d.index);
  return first;
}

DefaultDevices default_devices(const std::vector<PhysicalInfo>& devices) {
  DefaultDevices out;
  std::vector<const PhysicalInfo*> gpus;
  for (const PhysicalInfo& d : devices)
    if (d.type != VK_PHYSICAL_DEVICE_TYPE_CPU) gpus.push_back(&d);
  if (gpus.empty()) {  // CPU drivers only when nothing else is there
    for (const PhysicalInfo& d : devices) out.indices.push_back(d.index);
    return out;
  }
  const bool discrete = std::any_of(gpus.begin(), gpus.end(), [](const PhysicalInfo* d) {
    return d->type == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
  });
  // AMD backs RADV for Linux (AMDVLK and its proprietary driver discontinued in 2025); NVIDIA's
  // own driver is the one Brigade's GPU runs were measured on (docs/BENCHMARKS.md), NVK none.
  auto second_choice = [](const PhysicalInfo& d) {
    return d.driver_id == VK_DRIVER_ID_AMD_OPEN_SOURCE || d.driver_id == VK_DRIVER_ID_AMD_PROPRIETARY ||
           d.driver_id == VK_DRIVER_ID_MESA_NVK;
  };
  auto named = [](const PhysicalInfo& d) {
    return "device " + std::to_string(d.index) + " (" + d.name + ", " + (d.driver_name.empty() ? "driver unnamed" : d.driver_name) + ")";
  };
  for (const PhysicalInfo* d : gpus) {
    if (discrete && d->type == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU) {
      out.left_out.push_back(named(*d) + " left out: an integrated GPU, beside a discrete one");
      continue;
    }
    // The entry of its card taken: a first-choice driver's, then the first listed.
    auto rank = [&](const PhysicalInfo* e) { return std::pair(second_choice(*e), e->index); };
    const PhysicalInfo* taken = d;
    for (const PhysicalInfo* e : gpus)
      if (same_gpu(*e, *d) && rank(e) < rank(taken)) taken = e;
    if (taken != d) {
      out.left_out.push_back(named(*d) + " left out: the same GPU (PCI " + d->pci_bus + ") as " + named(*taken) +
                             (second_choice(*d) && !second_choice(*taken) ? ", whose driver is taken first" : ", listed first"));
      continue;
    }
    out.indices.push_back(d->index);
  }
  return out;
}

}  // namespace brigade::vk
