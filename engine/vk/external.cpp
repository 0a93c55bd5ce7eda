#include "vk/external.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "vk/check.h"

namespace brigade::vk {
namespace {

constexpr auto kFd = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
constexpr auto kHost = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;

VkBuffer create_external_buffer(Device& dev, uint64_t bytes, VkExternalMemoryHandleTypeFlagBits type) {
  VkExternalMemoryBufferCreateInfo external{VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO};
  external.handleTypes = type;
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.pNext = &external;
  info.size = bytes;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  VkBuffer buffer = VK_NULL_HANDLE;
  VK_CHECK(dev.vk().vkCreateBuffer(dev.handle(), &info, nullptr, &buffer));
  return buffer;
}

int first_type(const Device& dev, uint32_t bits, VkMemoryPropertyFlags want) {
  const auto& props = dev.memory().properties();
  for (uint32_t i = 0; i < props.memoryTypeCount; ++i)
    if ((bits & (1u << i)) && (props.memoryTypes[i].propertyFlags & want) == want) return int(i);
  return -1;
}

bool host_visible(const Device& dev, uint32_t type) {
  const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  return (dev.memory().properties().memoryTypes[type].propertyFlags & host) == host;
}

// Allocates the memory `buffer` is bound to, with `chain` (export or import info). On failure
// the buffer is destroyed and nothing was imported: an fd in `chain` is still the caller's.
VkDeviceMemory allocate(Device& dev, VkBuffer buffer, const void* chain, uint64_t size, uint32_t type,
                        Category category, const std::string& name, bool host_pointer) {
  VkMemoryDedicatedAllocateInfo dedicated{VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO};
  dedicated.pNext = chain;
  dedicated.buffer = buffer;
  VkMemoryAllocateInfo info{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  // Host-pointer imports may not be dedicated allocations.
  info.pNext = host_pointer ? chain : &dedicated;
  info.allocationSize = size;
  info.memoryTypeIndex = type;
  try {
    return dev.memory().allocate_dedicated(info, category, name);
  } catch (...) {
    dev.vk().vkDestroyBuffer(dev.handle(), buffer, nullptr);
    throw;
  }
}

// Binds `buffer` to `memory`, maps it where the device's memory is mapped (a host pointer's is
// its own) and wraps both; on failure both are released (an imported fd went with the memory).
Buffer finish(Device& dev, VkBuffer buffer, VkDeviceMemory memory, uint32_t type, uint64_t bytes,
              Category category, Charge charge, const std::string& name, void* host_ptr,
              uint32_t family = VK_QUEUE_FAMILY_EXTERNAL) {
  void* mapped = host_ptr;
  VkResult r = dev.vk().vkBindBufferMemory(dev.handle(), buffer, memory, 0);
  if (r == VK_SUCCESS && !mapped && host_visible(dev, type) && dev.info().device_memory_mapped)
    r = dev.vk().vkMapMemory(dev.handle(), memory, 0, VK_WHOLE_SIZE, 0, &mapped);
  if (r != VK_SUCCESS) {
    dev.vk().vkDestroyBuffer(dev.handle(), buffer, nullptr);
    dev.vk().vkFreeMemory(dev.handle(), memory, nullptr);
    VK_CHECK(r);
  }
  dev.name(VK_OBJECT_TYPE_DEVICE_MEMORY, memory, name + " memory");
  return Buffer(dev, DedicatedMemory{buffer, memory, mapped, charge == Charge::Counted, family}, bytes, category, name);
}

// The memory types a host pointer can be imported as, from what
// vkGetMemoryHostPointerPropertiesEXT reported. SwiftShader (its libVulkan.cpp, at least
// through 2023) reports VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, a property flag, where a mask of
// memory types is due: bit 1, a type it does not have (it has one, type 0, host-visible). Its
// import (ExternalMemoryHost) accepts any memory type, so its bits are read as "the
// host-visible types", as that source means them. Other drivers' bits are taken as they are.
uint32_t host_pointer_types(const Device& dev, uint32_t reported) {
  const auto& props = dev.memory().properties();
  const uint32_t existing = props.memoryTypeCount >= 32 ? ~0u : (1u << props.memoryTypeCount) - 1;
  if ((reported & existing) != 0 || dev.info().driver_id != VK_DRIVER_ID_GOOGLE_SWIFTSHADER) return reported;
  uint32_t visible = 0;
  for (uint32_t i = 0; i < props.memoryTypeCount; ++i)
    if (host_visible(dev, i)) visible |= 1u << i;
  return visible;
}

}  // namespace

bool can_share_fd(const Device& a, const Device& b) {
  return a.info().external_memory_fd && b.info().external_memory_fd &&
         a.info().device_uuid == b.info().device_uuid && a.info().driver_uuid == b.info().driver_uuid;
}

bool can_share_host(const Device& a, const Device& b) {
  return a.info().external_memory_host && b.info().external_memory_host;
}

std::string fd_import_problem(uint32_t type, uint64_t size, const VkMemoryRequirements& importer) {
  if (!(importer.memoryTypeBits & (1u << type)))
    return "the importing device cannot bind the buffer to the exported memory type " + std::to_string(type);
  if (importer.size > size)
    return "the importing device's buffer needs " + std::to_string(importer.size) + " bytes, the exported memory holds " +
           std::to_string(size);
  return "";
}

SharedBuffer share_fd(Device& exporter, Device& importer, uint64_t bytes, Category category,
                      const std::string& name, Charge charge) {
  if (!can_share_fd(exporter, importer))
    throw UserError("`link` fd: " + exporter.label() + " and " + importer.label() +
                    " cannot share opaque-fd memory (it needs one driver on one device, same "
                    "deviceUUID and driverUUID); use `link` host or staging");
  SharedBuffer out;
  VkBuffer src = create_external_buffer(exporter, bytes, kFd);
  VkMemoryRequirements req;
  exporter.vk().vkGetBufferMemoryRequirements(exporter.handle(), src, &req);
  int type = first_type(exporter, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (type < 0) type = first_type(exporter, req.memoryTypeBits, 0);
  if (type < 0) {
    exporter.vk().vkDestroyBuffer(exporter.handle(), src, nullptr);
    throw VulkanError(exporter.label() + ": no memory type can export memory for " + name, VK_ERROR_FEATURE_NOT_PRESENT);
  }
  VkExportMemoryAllocateInfo export_info{VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO};
  export_info.handleTypes = kFd;
  const std::string exported = name + " (exported)";
  VkDeviceMemory memory = allocate(exporter, src, &export_info, req.size, uint32_t(type), category, exported, false);
  out.first = finish(exporter, src, memory, uint32_t(type), bytes, category, charge, exported, nullptr);

  VkMemoryGetFdInfoKHR get{VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR};
  get.memory = out.first.memory();
  get.handleType = kFd;
  int fd = -1;
  VK_CHECK(exporter.vk().vkGetMemoryFdKHR(exporter.handle(), &get, &fd));

  // The fd is ours until an import succeeds, the driver's after: closed here only where no
  // import took it. An opaque fd is imported with the exporter's memory type and size (its
  // properties cannot be queried), so the importer's buffer must accept both.
  const std::string imported = name + " (imported)";
  VkBuffer dst = VK_NULL_HANDLE;
  try {
    dst = create_external_buffer(importer, bytes, kFd);
    VkMemoryRequirements req2;
    importer.vk().vkGetBufferMemoryRequirements(importer.handle(), dst, &req2);
    if (const std::string problem = fd_import_problem(uint32_t(type), req.size, req2); !problem.empty()) {
      importer.vk().vkDestroyBuffer(importer.handle(), dst, nullptr);
      throw VulkanError(importer.label() + ": " + imported + ": " + problem, VK_ERROR_FEATURE_NOT_PRESENT);
    }
    VkImportMemoryFdInfoKHR import_info{VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR};
    import_info.handleType = kFd;
    import_info.fd = fd;
    memory = allocate(importer, dst, &import_info, req.size, uint32_t(type), category, imported, false);
  } catch (...) {
    close(fd);
    throw;
  }
  out.second = finish(importer, dst, memory, uint32_t(type), bytes, category, charge, imported, nullptr);
  return out;
}

SharedBuffer share_host(Device& a, Device& b, uint64_t bytes, Category category,
                        const std::string& name, Charge charge) {
  if (!can_share_host(a, b))
    throw UserError("`link` host: " + a.label() + " or " + b.label() +
                    " lacks VK_EXT_external_memory_host; use `link` staging");
  const uint64_t align = std::max<uint64_t>({a.info().min_imported_host_pointer_alignment,
                                             b.info().min_imported_host_pointer_alignment,
                                             uint64_t(sysconf(_SC_PAGESIZE))});
  const uint64_t size = (bytes + align - 1) / align * align;
  void* ptr = std::aligned_alloc(align, size);
  if (!ptr) throw UserError("out of host memory allocating " + std::to_string(size) + " bytes for " + name);
  std::memset(ptr, 0, size);
  SharedBuffer out;
  out.host = std::shared_ptr<void>(ptr, std::free);
  Device* devices[2] = {&a, &b};
  // Between devices of one driver the memory is exchanged with VK_QUEUE_FAMILY_EXTERNAL, which
  // names their queues; across drivers with VK_QUEUE_FAMILY_FOREIGN_EXT where both know it
  // (both sides alike: one releases to the family the other acquires from).
  const bool alike = a.info().device_uuid == b.info().device_uuid && a.info().driver_uuid == b.info().driver_uuid;
  const uint32_t family =
      alike || !a.foreign_queues() || !b.foreign_queues() ? VK_QUEUE_FAMILY_EXTERNAL : VK_QUEUE_FAMILY_FOREIGN_EXT;
  for (int i = 0; i < 2; ++i) {
    Device& dev = *devices[i];
    VkMemoryHostPointerPropertiesEXT props{VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
    VK_CHECK(dev.vk().vkGetMemoryHostPointerPropertiesEXT(dev.handle(), kHost, ptr, &props));
    VkBuffer buffer = create_external_buffer(dev, size, kHost);
    VkMemoryRequirements req;
    dev.vk().vkGetBufferMemoryRequirements(dev.handle(), buffer, &req);
    const int type = first_type(dev, req.memoryTypeBits & host_pointer_types(dev, props.memoryTypeBits), 0);
    if (type < 0) {
      dev.vk().vkDestroyBuffer(dev.handle(), buffer, nullptr);
      throw VulkanError(dev.label() + ": no memory type can import host memory for " + name,
                        VK_ERROR_FEATURE_NOT_PRESENT);
    }
    VkImportMemoryHostPointerInfoEXT import_info{VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT};
    import_info.handleType = kHost;
    import_info.pHostPointer = ptr;
    const std::string side = name + (i ? " (host, second)" : " (host, first)");
    VkDeviceMemory memory = allocate(dev, buffer, &import_info, size, uint32_t(type), category, side, true);
    Buffer buf = finish(dev, buffer, memory, uint32_t(type), bytes, category, charge, side, ptr, family);
    (i ? out.second : out.first) = std::move(buf);
  }
  return out;
}

}  // namespace brigade::vk
