// Checks of the optimizer family's invariants, for broken calls in the caller's code (not
// user errors): they throw vk::VulkanError naming the file:line of the check.
#pragma once

#include <string>

namespace brigade::optim {

void expect(bool ok, const char* file, int line, const std::string& what);

}  // namespace brigade::optim

#define BRIGADE_OPTIM_EXPECT(cond, what) \
  ::brigade::optim::expect((cond), __FILE__, __LINE__, (what))
