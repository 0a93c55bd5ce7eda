// A dispatch's grid lowered for a scope: the launchers take at most `groups` workgroups along
// each dimension (ops::max_groups, which --max-groups lowers for a whole run, tests/main.cpp)
// and walk the rest in further dispatches, and a dispatch of more is refused (vk::lowered_grid),
// so those walks run, and are checked, on a test's small tensors.
#pragma once

#include <cstdint>

#include "ops/launch_geometry.h"
#include "vk/commands.h"

namespace brigade::test {

class GridCap {
 public:
  explicit GridCap(uint32_t groups)
      : launchers_(ops::max_groups().exchange(groups)), dispatches_(vk::lowered_grid().exchange(groups)) {}
  ~GridCap() {
    ops::max_groups() = launchers_;
    vk::lowered_grid() = dispatches_;
  }
  GridCap(const GridCap&) = delete;
  GridCap& operator=(const GridCap&) = delete;

 private:
  uint32_t launchers_, dispatches_;
};

}  // namespace brigade::test
