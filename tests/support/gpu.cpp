#include "gpu.h"

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "util/error.h"

namespace brigade::test {

vk::Instance& instance() {
  static vk::Instance inst(vk::InstanceOptions{.validation = true, .sync_validation = true});
  return inst;
}

namespace {

// The physical device `spec` names; a test fails saying which drivers it was given when none
// matches (tests/CMakeLists.txt adds SwiftShader to the suites that use it).
uint32_t find_physical(const std::string& spec, const std::string& what) {
  try {
    return instance().find_device(spec, what);
  } catch (const UserError& e) {
    const char* added = std::getenv("VK_ADD_DRIVER_FILES");
    FAIL(std::string(e.what()) << (added ? std::string("; VK_ADD_DRIVER_FILES=") + added : std::string())
                  << " (tools/install-swiftshader.sh installs SwiftShader)");
  }
  return 0;
}

using Devices = std::map<std::pair<std::string, size_t>, std::unique_ptr<vk::Device>>;

// The devices the cases share under --share-devices, by (physical device spec, index); ""
// is the test's physical device.
Devices& shared_devices() {
  static Devices* devices = new Devices();  // released by release_shared_devices, before the instance
  return *devices;
}

vk::Device& make_device(std::unique_ptr<vk::Device>& d, const std::string& spec, size_t i, uint64_t mem_limit) {
  if (!d)
    d = std::make_unique<vk::Device>(
        instance(), spec.empty() ? test_device_index() : find_physical(spec, "test device"),
        vk::DeviceOptions{.label = "test stage " + std::to_string(i) + (spec.empty() ? "" : " on " + spec),
                          .mem_limit = mem_limit,
                          .subgroup_size = test_subgroup_size()});
  return *d;
}

// The validation layer's messages after the first `count`.
std::vector<std::string> messages_since(size_t count) {
  auto all = instance().messages();
  return {all.begin() + long(std::min(count, all.size())), all.end()};
}

}  // namespace

bool sharing_devices() {
  static const bool on = std::getenv("BRIGADE_TEST_SHARE_DEVICES") != nullptr;
  return on;
}

std::vector<std::string> release_shared_devices() {
  const size_t before = instance().message_count();
  shared_devices().clear();
  return messages_since(before);
}

uint32_t test_device_index() {
  static const uint32_t index = [] {
    const char* env = std::getenv("BRIGADE_TEST_DEVICE");
    return env ? find_physical(env, "BRIGADE_TEST_DEVICE") : 0u;
  }();
  return index;
}

uint32_t test_subgroup_size() {
  const char* env = std::getenv("BRIGADE_TEST_SUBGROUP_SIZE");
  return env ? uint32_t(std::strtoul(env, nullptr, 10)) : 0;
}

int run_each_subgroup_size(char** argv) {
  // The tests' own instance: where the device offers one size, the tests run in this process.
  const auto devices = instance().describe_devices();
  const char* env = std::getenv("BRIGADE_TEST_DEVICE");
  const std::vector<uint32_t> sizes = vk::subgroup_sizes(devices.at(env ? instance().find_device(env, "BRIGADE_TEST_DEVICE") : 0));
  if (sizes.size() == 1) {
    setenv("BRIGADE_TEST_SUBGROUP_SIZE", std::to_string(sizes[0]).c_str(), 1);
    return -1;
  }
  int failed = 0;
  bool not_run = false;
  for (uint32_t size : sizes) {
    std::printf("== subgroup size %u\n", size);
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
      setenv("BRIGADE_TEST_SUBGROUP_SIZE", std::to_string(size).c_str(), 1);
      execv("/proc/self/exe", argv);
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == kNotRunHere) {
      not_run = true;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::printf("== subgroup size %u: FAILED\n", size);
      failed = 1;
    }
  }
  return failed ? 1 : not_run ? kNotRunHere : 0;
}

Gpu::Gpu() : baseline_(instance().message_count()) {}

Gpu::~Gpu() {
  devices_.clear();
  named_.clear();
  if (sharing_devices())
    for (auto& entry : shared_devices()) {
      if (!entry.second) continue;  // its creation failed the case that asked for it
      vk::Device& d = *entry.second;
      d.settle(10'000'000'000);
      const vk::MemoryStats m = d.memory().stats();
      CHECK_MESSAGE(m.total_current == 0, d.label(), " still holds ", m.total_current,
                    " bytes after the test, on a device the cases share");
      d.memory().reset_peaks();
    }
  const auto messages = new_messages();
  for (auto& m : messages) MESSAGE(m);
  CHECK_MESSAGE(messages.empty(), "the validation layer reported ", messages.size(),
                " message(s) during this test");
}

vk::Device& Gpu::device(size_t i, uint64_t mem_limit) {
  if (sharing_devices() && mem_limit == 0) return make_device(shared_devices()[{"", i}], "", i, 0);
  if (devices_.size() <= i) devices_.resize(i + 1);
  return make_device(devices_[i], "", i, mem_limit);
}

vk::Device& Gpu::device_on(const std::string& spec, size_t i) {
  return make_device((sharing_devices() ? shared_devices() : named_)[{spec, i}], spec, i, 0);
}

std::vector<std::string> Gpu::new_messages() const { return messages_since(baseline_); }

void Gpu::accept_messages() { baseline_ = instance().message_count(); }

bool is_swiftshader(const vk::PhysicalInfo& info) { return info.driver_id == VK_DRIVER_ID_GOOGLE_SWIFTSHADER; }

vk::PhysicalInfo synthetic_gpu(vk::MatrixShape::Element element) {
  vk::PhysicalInfo gpu;
  gpu.name = "a GPU";
  gpu.type = VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
  gpu.subgroup_size = 32, gpu.max_shared_memory = 49152, gpu.max_workgroup_invocations = 1024;
  gpu.min_subgroup_size = gpu.max_subgroup_size = 32, gpu.full_subgroups = true;  // NVIDIA's
  gpu.matrix_units.shapes = {{16, 16, 16, element}};
  gpu.matrix_units.vulkan_memory_model = true;
  vk::fit_matrix_units(gpu);
  return gpu;
}

}  // namespace brigade::test
