#include "vk/check.h"

namespace brigade::vk {

const char* result_name(VkResult r) {
  switch (r) {
#define CASE(x) \
  case x:       \
    return #x;
    CASE(VK_SUCCESS)
    CASE(VK_NOT_READY)
    CASE(VK_TIMEOUT)
    CASE(VK_EVENT_SET)
    CASE(VK_EVENT_RESET)
    CASE(VK_INCOMPLETE)
    CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    CASE(VK_ERROR_INITIALIZATION_FAILED)
    CASE(VK_ERROR_DEVICE_LOST)
    CASE(VK_ERROR_MEMORY_MAP_FAILED)
    CASE(VK_ERROR_LAYER_NOT_PRESENT)
    CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    CASE(VK_ERROR_TOO_MANY_OBJECTS)
    CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
    CASE(VK_ERROR_FRAGMENTED_POOL)
    CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    CASE(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    CASE(VK_ERROR_FRAGMENTATION)
    CASE(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    CASE(VK_ERROR_UNKNOWN)
#undef CASE
    default:
      return "VK_ERROR_(unnamed)";
  }
}

void fail(VkResult r, const char* call, const char* file, int line) {
  throw VulkanError(failure_text(r, call, file, line), r);
}

std::string failure_text(VkResult r, const char* call, const char* file, int line) {
  std::string what = std::string(file) + ":" + std::to_string(line) + ": " + call + " returned " +
                     result_name(r);
  if (r == VK_ERROR_DEVICE_LOST) what += " (the GPU driver reset or removed the device)";
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY)
    what += " (the driver ran out of device memory; try `memory_cap` below the card's size)";
  return what;
}

}  // namespace brigade::vk
