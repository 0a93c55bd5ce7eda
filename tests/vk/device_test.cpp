#include <doctest/doctest.h>

#include "gpu.h"
#include "vk/check.h"
#include "vk/physical.h"
#include "vk/spirv.h"

namespace vk_device_test {

using namespace brigade;

TEST_CASE("physical device description is complete and consistent") {
  const auto& physical = test::instance().physical_devices();
  REQUIRE(!physical.empty());
  for (uint32_t i = 0; i < physical.size(); ++i) {
    const vk::PhysicalInfo info = vk::describe(physical[i], i);
    INFO("device ", i, ": ", info.name);
    CHECK(!info.name.empty());
    CHECK(!info.driver_name.empty());
    CHECK(!info.vendor.empty());
    CHECK(info.subgroup_size >= 1);
    CHECK(info.max_storage_buffer_range >= (1u << 27) - 1);  // spec minimum is 2^27
    CHECK(info.max_allocation_size >= (1u << 30));           // spec minimum is 2^30
    CHECK(!info.heaps.empty());
    CHECK(info.device_uuid_string().size() == 36);
    CHECK(info.device_uuid != std::array<uint8_t, VK_UUID_SIZE>{});
    CHECK(info.external_memory_fd == info.has_extension("VK_KHR_external_memory_fd"));
    // A heap's budget where the device lists VK_EXT_memory_budget (lavapipe does), and what
    // the plan takes of the heap: the budget where told and smaller, else the heap's size.
    for (const vk::MemoryHeap& h : info.heaps) {
      CHECK((h.budget > 0) == info.has_extension("VK_EXT_memory_budget"));
      CHECK(h.usable() == (h.budget && h.budget < h.size ? h.budget : h.size));
    }
  }
  vk::MemoryHeap display{8ull << 30, true, 6ull << 30};  // 2 GiB held by the desktop
  CHECK(display.usable() == 6ull << 30);
  display.budget = 0;
  CHECK(display.usable() == 8ull << 30);
}

TEST_CASE("lavapipe offers what the pipeline needs: timelines, fd and host-pointer memory") {
  const auto& physical = test::instance().physical_devices();
  bool found = false;
  for (uint32_t i = 0; i < physical.size(); ++i) {
    const vk::PhysicalInfo info = vk::describe(physical[i], i);
    if (info.driver_name != "llvmpipe") continue;
    found = true;
    CHECK(info.type == VK_PHYSICAL_DEVICE_TYPE_CPU);
    CHECK(info.timeline_semaphore);
    CHECK(info.subgroup_arithmetic);
    CHECK(info.external_memory_fd);
    CHECK(info.external_memory_host);
    CHECK(info.min_imported_host_pointer_alignment > 0);
    CHECK(info.max_storage_buffer_range == 128u << 20);
  }
  CHECK_MESSAGE(found, "no lavapipe device: install mesa-vulkan-drivers");
}

TEST_CASE_FIXTURE(test::Gpu, "a device index past the last device is refused with the count") {
  const uint32_t n = uint32_t(test::instance().physical_devices().size());
  try {
    vk::Device dev(test::instance(), n);
    FAIL("no error");
  } catch (const UserError& e) {
    const std::string what = e.what();
    CHECK(what.find("index " + std::to_string(n) + " does not exist") != std::string::npos);
    CHECK(what.find("brigade devices") != std::string::npos);
  }
}

TEST_CASE("shader reflection finds bindings and which ones are written") {
  const auto iface = vk::reflect(vk::shader_spirv("axpy"), "axpy");
  CHECK(iface.bindings == 2);
  CHECK(iface.written_mask == 0b10);  // x readonly, y written
  CHECK_THROWS_WITH_AS(vk::shader_spirv("no_such_kernel"),
                       doctest::Contains("no shader named 'no_such_kernel'"), vk::VulkanError);
  const uint32_t junk[] = {1, 2, 3, 4, 5, 6};
  CHECK_THROWS_WITH_AS(vk::reflect(junk, "junk"), doctest::Contains("not SPIR-V"), vk::VulkanError);
}

TEST_CASE("Vulkan failures name the file, the line and the call") {
  try {
    VK_CHECK(VK_ERROR_DEVICE_LOST);
    FAIL("no error");
  } catch (const vk::VulkanError& e) {
    const std::string what = e.what();
    CHECK(what.find("device_test.cpp:") != std::string::npos);
    CHECK(what.find("VK_ERROR_DEVICE_LOST") != std::string::npos);
    CHECK(e.result == VK_ERROR_DEVICE_LOST);
  }
}

}  // namespace vk_device_test
