#include "optim/expect.h"

#include "vk/check.h"

namespace brigade::optim {

void expect(bool ok, const char* file, int line, const std::string& what) {
  if (!ok)
    throw vk::VulkanError(std::string(file) + ":" + std::to_string(line) + ": " + what,
                          VK_ERROR_UNKNOWN);
}

}  // namespace brigade::optim
