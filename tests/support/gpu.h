// The validation harness every GPU test runs under.
//
// One Vulkan instance per test process, created with VK_LAYER_KHRONOS_validation and
// synchronization validation, its messages routed through a debug-utils messenger. A test
// that uses the `Gpu` fixture fails if any warning or error is reported while it runs,
// including while its devices are destroyed.
#pragma once

#include <cstdlib>
#include <map>
#include <utility>
#include <memory>
#include <string>
#include <vector>

#include "vk/device.h"
#include "vk/instance.h"

namespace brigade::test {

vk::Instance& instance();

// The physical device tests run on: BRIGADE_TEST_DEVICE (an index, part of a device's name
// or a UUID prefix, as --devices takes), else 0.
uint32_t test_device_index();
// The subgroup size every kernel of the tests' devices runs with: BRIGADE_TEST_SUBGROUP_SIZE,
// else 0 (the driver's choice).
uint32_t test_subgroup_size();
// Runs this test program (with `argv`, null-terminated) once per subgroup size the test
// device offers (vk::subgroup_sizes), each with BRIGADE_TEST_SUBGROUP_SIZE set to it;
// fails if any run fails. A device of one size: BRIGADE_TEST_SUBGROUP_SIZE set to it and -1,
// for the caller to run the tests itself. kNotRunHere where no run failed and one returned it.
int run_each_subgroup_size(char** argv);
// SwiftShader: no matrix units, so Brigade never runs the matrix-unit kernels there, and its
// compiler takes long over their plain builds. The kernel tests run those builds on lavapipe
// (and on matrix units under tools/coopmat-check.sh), not in SwiftShader's copy of the suite.
bool is_swiftshader(const vk::PhysicalInfo& info);

// A GPU as Vulkan would describe one, for host-only tests: subgroups of 32, 48 KiB of shared
// memory, 1024 invocations a workgroup, and matrix units of 16x16x16 `element` it can use.
vk::PhysicalInfo synthetic_gpu(vk::MatrixShape::Element element);

// --share-devices (tests/main.cpp, which sets BRIGADE_TEST_SHARE_DEVICES): the cases of one
// run share their logical devices, each made once per process rather than once per case, so
// each kernel's pipeline is built once (SwiftShader keeps no pipelines across processes).
// A device with a memory cap is still the case's own. A case must leave nothing allocated on
// a shared device: its fixture checks, and waits for the device first.
bool sharing_devices();
// Destroys the shared devices (main, after the run) and returns the validation layer's
// messages since the last case ended: what their destruction reported.
std::vector<std::string> release_shared_devices();
// The exit status of a run in which no case failed and some said they cannot run here (`not on
// this device:`, tests/main.cpp): ctest's SKIP_RETURN_CODE.
inline constexpr int kNotRunHere = 77;

class Gpu {
 public:
  Gpu();
  ~Gpu();

  // The i-th logical device of this test (created on first use) on the test's physical
  // device, so device(0..3) are four logical devices on one physical device.
  vk::Device& device(size_t i = 0, uint64_t mem_limit = 0);
  // The i-th logical device of this test on the physical device `spec` names (an index, part
  // of a name or a UUID prefix): device_on("swiftshader", 1).
  vk::Device& device_on(const std::string& spec, size_t i);
  // Validation messages reported since the fixture began.
  std::vector<std::string> new_messages() const;
  // For negative tests: accept the messages so far (after checking them).
  void accept_messages();

 private:
  size_t baseline_ = 0;
  std::vector<std::unique_ptr<vk::Device>> devices_;
  std::map<std::pair<std::string, size_t>, std::unique_ptr<vk::Device>> named_;
};

}  // namespace brigade::test
