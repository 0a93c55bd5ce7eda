// Which lavapipe a process loads. tools/install-lavapipe.sh puts a newer Mesa's lavapipe (the
// Vulkan driver that runs on the CPU) into .drivers/lavapipe/ of the checkout. Every Brigade
// program and test loads that one in place of the system's lavapipe when it is present, so
// one lavapipe is listed, not two; without it, the system's is used as before.
//   BRIGADE_LAVAPIPE=system   the system's lavapipe even when the newer one is present
//   VK_DRIVER_FILES / VK_ICD_FILENAMES set: the user chose the drivers; nothing is changed
// The choice is made once per process, before the Vulkan loader first looks for drivers, by
// adding the manifest to VK_ADD_DRIVER_FILES and the system's lvp_icd.*.json to
// VK_LOADER_DRIVERS_DISABLE; programs this one starts inherit it.
#pragma once

#include <string>

namespace brigade::vk {

struct LavapipeChoice {
  bool project = false;  // the checkout's lavapipe, not the system's
  std::string version;   // of the checkout's, e.g. "Mesa 25.0.7-2~bpo12+1"; empty if none
  std::string why;       // one line: which lavapipe, and why
};

// Decides (on the first call) and returns the choice.
const LavapipeChoice& choose_lavapipe();

}  // namespace brigade::vk
