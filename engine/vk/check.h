// Error reporting for the Vulkan layer.
//
// Two kinds of failure, reported differently (DESIGN.md, "Engineering rules"):
//   UserError   - bad input or a limit the user can change: one clear line, no file:line.
//   VulkanError - a failing driver call or a broken invariant: file:line and the call.
#pragma once

#include <volk.h>

#include <stdexcept>
#include <string>

namespace brigade {

struct UserError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace vk {

struct VulkanError : std::runtime_error {
  VulkanError(std::string what, VkResult r) : std::runtime_error(std::move(what)), result(r) {}
  VkResult result;
};

const char* result_name(VkResult r);

[[noreturn]] void fail(VkResult r, const char* call, const char* file, int line);

inline void check(VkResult r, const char* call, const char* file, int line) {
  if (r != VK_SUCCESS) fail(r, call, file, line);
}

}  // namespace vk
}  // namespace brigade

#define VK_CHECK(call) ::brigade::vk::check((call), #call, __FILE__, __LINE__)
