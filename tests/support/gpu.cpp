#include "gpu.h"

#include <doctest/doctest.h>

namespace brigade::test {

vk::Instance& instance() {
  static vk::Instance inst(vk::InstanceOptions{.validation = true, .sync_validation = true});
  return inst;
}

uint32_t test_device_index() {
  const char* env = std::getenv("BRIGADE_TEST_DEVICE");
  return env ? uint32_t(std::strtoul(env, nullptr, 10)) : 0;
}

Gpu::Gpu() : baseline_(instance().message_count()) {}

Gpu::~Gpu() {
  devices_.clear();
  const auto messages = new_messages();
  for (auto& m : messages) MESSAGE(m);
  CHECK_MESSAGE(messages.empty(), "the validation layer reported ", messages.size(),
                " message(s) during this test");
}

vk::Device& Gpu::device(size_t i, uint64_t mem_limit) {
  if (devices_.size() <= i) devices_.resize(i + 1);
  if (!devices_[i])
    devices_[i] = std::make_unique<vk::Device>(
        instance(), test_device_index(),
        vk::DeviceOptions{.label = "test stage " + std::to_string(i), .mem_limit = mem_limit});
  return *devices_[i];
}

std::vector<std::string> Gpu::new_messages() const {
  auto all = instance().messages();
  return {all.begin() + long(std::min(baseline_, all.size())), all.end()};
}

void Gpu::accept_messages() { baseline_ = instance().message_count(); }

}  // namespace brigade::test
