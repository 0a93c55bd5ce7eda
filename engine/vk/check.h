// Error reporting for the Vulkan layer.
//
// Two kinds of failure, reported differently (DESIGN.md, "Engineering rules"):
//   UserError   - bad input or a limit the user can change: one clear line, no file:line.
//   VulkanError - a failing driver call or a broken invariant: file:line and the call.
#pragma once

#include <volk.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace brigade {

// The message is always one line: control characters that came with quoted input (a newline
// in a tensor name, a tab in a TOML key) are written as escapes: \n, \r, \t, \xNN.
std::string one_line(std::string_view text);

struct UserError : std::runtime_error {
  explicit UserError(std::string_view what) : std::runtime_error(one_line(what)) {}
};

namespace vk {

struct VulkanError : std::runtime_error {
  VulkanError(std::string what, VkResult r) : std::runtime_error(std::move(what)), result(r) {}
  VkResult result;
};

const char* result_name(VkResult r);

[[noreturn]] void fail(VkResult r, const char* call, const char* file, int line);
// "file:line: call returned VK_ERROR_... (what it usually means)".
std::string failure_text(VkResult r, const char* call, const char* file, int line);

// A broken invariant in the calling code (not a user error): names file:line.
[[noreturn]] void fail_invariant(const char* file, int line, const std::string& what);

inline void check(VkResult r, const char* call, const char* file, int line) {
  if (r != VK_SUCCESS) fail(r, call, file, line);
}

}  // namespace vk
}  // namespace brigade

#define VK_CHECK(call) ::brigade::vk::check((call), #call, __FILE__, __LINE__)
#define BRIGADE_EXPECT(cond, what) \
  ((cond) ? (void)0 : ::brigade::vk::fail_invariant(__FILE__, __LINE__, (what)))
