// Vulkan's result checks: a failing driver call is a VulkanError naming file:line, the call
// and its result. The engine's other errors (UserError, BRIGADE_EXPECT) are in util/error.h.
#pragma once

#include <volk.h>

#include <stdexcept>
#include <string>

#include "util/error.h"

namespace brigade::vk {

struct VulkanError : std::runtime_error {
  VulkanError(std::string what, VkResult r) : std::runtime_error(std::move(what)), result(r) {}
  VkResult result;
};

const char* result_name(VkResult r);

[[noreturn]] void fail(VkResult r, const char* call, const char* file, int line);
// "file:line: call returned VK_ERROR_... (what it usually means)".
std::string failure_text(VkResult r, const char* call, const char* file, int line);

inline void check(VkResult r, const char* call, const char* file, int line) {
  if (r != VK_SUCCESS) fail(r, call, file, line);
}

}  // namespace brigade::vk

#define VK_CHECK(call) ::brigade::vk::check((call), #call, __FILE__, __LINE__)
