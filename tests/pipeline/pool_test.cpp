// The devices --plan auto takes when none are named (vk::default_devices), and one GPU listed
// by two drivers held to its memory as one device (vk::gpu_of), on synthetic device lists.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gpu.h"
#include "model/model.h"
#include "pipeline/plan.h"
#include "vk/physical.h"

namespace pipeline_pool_test {

using namespace brigade;

namespace {

vk::PhysicalInfo entry(uint32_t index, VkPhysicalDeviceType type, VkDriverId driver, const std::string& driver_name,
                       const std::string& pci_bus) {
  vk::PhysicalInfo d = test::synthetic_gpu(vk::MatrixShape::Element::Fp16);
  d.index = index, d.type = type, d.driver_id = driver, d.driver_name = driver_name, d.pci_bus = pci_bus;
  d.name = type == VK_PHYSICAL_DEVICE_TYPE_CPU ? "llvmpipe" : "a GPU at " + pci_bus;
  return d;
}

constexpr VkPhysicalDeviceType kDiscrete = VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
constexpr VkPhysicalDeviceType kIntegrated = VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;

bool says(const std::vector<std::string>& lines, const std::string& start, const std::string& part) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
    return l.starts_with(start) && l.find(part) != std::string::npos;
  });
}

}  // namespace

TEST_CASE("one GPU listed by two drivers is one entry of the default devices, RADV before AMDVLK and NVIDIA's before NVK") {
  const std::vector<vk::PhysicalInfo> amd = {
      entry(0, kDiscrete, VK_DRIVER_ID_AMD_OPEN_SOURCE, "AMD open-source driver", "0000:03:00.0"),
      entry(1, kDiscrete, VK_DRIVER_ID_MESA_RADV, "radv", "0000:03:00.0"),
      entry(2, VK_PHYSICAL_DEVICE_TYPE_CPU, VK_DRIVER_ID_MESA_LLVMPIPE, "llvmpipe", "")};
  vk::DefaultDevices d = vk::default_devices(amd);
  CHECK(d.indices == std::vector<uint32_t>{1});
  REQUIRE(d.left_out.size() == 1);  // the CPU driver goes unsaid, as before
  CHECK(says(d.left_out, "device 0 (a GPU at 0000:03:00.0, AMD open-source driver) left out: ",
             "the same GPU (PCI 0000:03:00.0) as device 1 (a GPU at 0000:03:00.0, radv), whose driver is taken first"));

  const std::vector<vk::PhysicalInfo> nvidia = {
      entry(0, kDiscrete, VK_DRIVER_ID_MESA_NVK, "NVK", "0000:01:00.0"),
      entry(1, kDiscrete, VK_DRIVER_ID_NVIDIA_PROPRIETARY, "NVIDIA", "0000:01:00.0"),
      entry(2, kDiscrete, VK_DRIVER_ID_NVIDIA_PROPRIETARY, "NVIDIA", "0000:02:00.0")};  // another card
  d = vk::default_devices(nvidia);
  CHECK(d.indices == std::vector<uint32_t>{1, 2});
  CHECK(says(d.left_out, "device 0 (", "as device 1 ("));

  // Drivers of equal standing: the first listed; entries without a PCI address are each their own.
  const std::vector<vk::PhysicalInfo> even = {
      entry(0, kDiscrete, VK_DRIVER_ID_INTEL_OPEN_SOURCE_MESA, "Intel open-source Mesa driver", "0000:04:00.0"),
      entry(1, kDiscrete, VK_DRIVER_ID_INTEL_PROPRIETARY_WINDOWS, "Intel", "0000:04:00.0"),
      entry(2, kDiscrete, VK_DRIVER_ID_MESA_RADV, "radv", ""), entry(3, kDiscrete, VK_DRIVER_ID_MESA_RADV, "radv", "")};
  d = vk::default_devices(even);
  CHECK(d.indices == std::vector<uint32_t>{0, 2, 3});
  CHECK(says(d.left_out, "device 1 (", "as device 0 (a GPU at 0000:04:00.0, Intel open-source Mesa driver), listed first"));
}

TEST_CASE("an integrated GPU is left out of the default devices beside a discrete one, and taken alone") {
  const vk::PhysicalInfo igpu = entry(0, kIntegrated, VK_DRIVER_ID_MESA_RADV, "radv", "0000:7c:00.0");
  const vk::PhysicalInfo gpu = entry(1, kDiscrete, VK_DRIVER_ID_MESA_RADV, "radv", "0000:03:00.0");
  const vk::PhysicalInfo cpu = entry(2, VK_PHYSICAL_DEVICE_TYPE_CPU, VK_DRIVER_ID_MESA_LLVMPIPE, "llvmpipe", "");
  vk::DefaultDevices d = vk::default_devices({igpu, gpu, cpu});
  CHECK(d.indices == std::vector<uint32_t>{1});
  CHECK(d.left_out == std::vector<std::string>{
                          "device 0 (a GPU at 0000:7c:00.0, radv) left out: an integrated GPU, beside a discrete one"});
  d = vk::default_devices({igpu, cpu});
  CHECK(d.indices == std::vector<uint32_t>{0});
  CHECK(d.left_out.empty());
  // CPU drivers only when nothing else is there.
  d = vk::default_devices({cpu});
  CHECK(d.indices == std::vector<uint32_t>{2});
}

TEST_CASE("stages on two drivers' entries of one GPU are held to its memory together") {
  const std::vector<vk::PhysicalInfo> all = {
      entry(0, kDiscrete, VK_DRIVER_ID_MESA_RADV, "radv", "0000:03:00.0"),
      entry(1, kDiscrete, VK_DRIVER_ID_AMD_OPEN_SOURCE, "AMD open-source driver", "0000:03:00.0"),
      entry(2, kDiscrete, VK_DRIVER_ID_MESA_RADV, "radv", "0000:04:00.0")};
  CHECK(vk::gpu_of(all, 0) == 0);
  CHECK(vk::gpu_of(all, 1) == 0);
  CHECK(vk::gpu_of(all, 2) == 2);
  const model::Model m = model::build("fashion-mlp");
  pipeline::PlanOptions o;
  o.rows = 64, o.optimizer_states = 2;
  o.stages.assign(2, pipeline::StageSpec{});
  for (uint32_t k = 0; k < 2; ++k) o.stages[k].physical = vk::gpu_of(all, k), o.stages[k].device_memory = 9 << 19;
  const pipeline::Plan one_gpu = pipeline::plan(m, o);  // 4.5 MiB each: 5 MiB needed together, 4 the larger stage
  CHECK(one_gpu.problem.find("stages 0, 1 on device 0 need ") != std::string::npos);
  o.stages[1].physical = vk::gpu_of(all, 2);  // another card: each stage fits its own
  const pipeline::Plan two_gpus = pipeline::plan(m, o);
  CHECK_MESSAGE(two_gpus.problem.empty(), two_gpus.problem);
}

}  // namespace pipeline_pool_test
