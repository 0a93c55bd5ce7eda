// The engine's two kinds of failure (DESIGN.md, "Engineering rules"), below every layer:
//   UserError      - bad input or a limit the user can change: one clear line, no file:line.
//   InternalError  - a broken invariant in the calling code: file:line and what broke.
// Vulkan's own failures (a driver call's result) are vk::VulkanError, in vk/check.h.
// A message names one of the engine's settings by its own name in backquotes ("use more
// micro-batches (`micro_batches`)", "over `memory_cap`"): the settings of PlanOptions,
// ExecutorOptions and the like. A front end writes each as whatever sets it (the command
// line: its flag); elsewhere the name stands.
#pragma once

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

struct InternalError : std::logic_error {
  using std::logic_error::logic_error;
};

// Throws InternalError "file:line: what".
[[noreturn]] void fail_invariant(const char* file, int line, const std::string& what);

}  // namespace brigade

#define BRIGADE_EXPECT(cond, what) \
  ((cond) ? (void)0 : ::brigade::fail_invariant(__FILE__, __LINE__, (what)))
