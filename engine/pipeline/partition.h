// Cutting a sequence of L layers into K contiguous cells, one per stage.
//
// GPipe balances estimated cost with a variance heuristic; here the cut minimizes the
// slowest stage exactly (min-max contiguous partition by dynamic programming), with each
// stage's time scaled by its own device's speed, so a slower device gets fewer layers, and
// with an optional memory bound per stage.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "util/error.h"

namespace brigade::pipeline {

struct LayerCost {
  double time = 0;      // estimated or profiled cost of the layer on a reference device
  uint64_t memory = 0;  // bytes the layer needs on whichever stage holds it
};

// What a stage's device makes of the model (pipeline::device_facts), per layer of it:
//   stores_half     whether its kernels read and write 16-bit tensors themselves there
//                   (model::Layer::stores_half); empty: none do, every 16-bit layer runs on
//                   fp32 copies;
//   lean_scratch    the 16-bit precisions in which it needs less scratch there
//                   (model::Layer::lean_scratch); empty: none;
// the workspace a cell there keeps for its products' split K (ops::matmul_workspace_bytes;
// CellLayout::workspace_bytes); and the largest buffer a kernel there binds whole
// (maxStorageBufferRange) and the largest allocation (maxMemoryAllocationSize), 0 where not
// known (pipeline::over_device_limits); and the staging buffer its device holds while the host
// copies to or from memory it does not map (vk::kStagingBytes there, else 0).
struct DeviceFacts {
  std::vector<bool> stores_half;
  std::vector<uint8_t> lean_scratch;
  uint64_t workspace_bytes = 0;
  uint64_t max_binding = 0, max_allocation = 0;
  uint64_t staging_bytes = 0;
  auto operator<=>(const DeviceFacts&) const = default;
};

struct StageSpec {
  double speed = 1.0;       // relative throughput of this stage's device (2.0 = twice as fast)
  uint64_t memory_cap = 0;  // bytes; 0 = unbounded
  std::string device;       // for messages: "device 0, llvmpipe (...)"
  // The physical device behind this stage (one key for every driver's entry of one GPU:
  // vk::gpu_of) and its largest device-local heap (0: unknown). With or without caps, the
  // stages sharing a physical device must fit it together.
  uint32_t physical = 0;
  uint64_t device_memory = 0;
  // Measured time of every layer of the model on this stage's own device (profiled). When
  // given, it replaces LayerCost::time / speed for this stage.
  std::vector<double> layer_times;
  // What this stage's device makes of the model's layers; none of it by default.
  DeviceFacts facts;
  // Time of layers [first, last) on this stage.
  double time(const std::vector<LayerCost>& layers, size_t first, size_t last) const;
};

struct Partition {
  std::vector<uint32_t> sizes;      // layers per stage, in order; sums to L
  std::vector<double> stage_time;   // sum of the cell's layer times / the stage's speed
  std::vector<uint64_t> stage_memory;
  double max_time = 0;              // the slowest stage: what the pipeline runs at
  uint32_t first_layer(uint32_t stage) const;
};

// The contiguous partition that minimizes the slowest stage's time, every stage holding at
// least one layer and fitting its memory cap. Throws UserError when K > L or when no
// partition fits the caps (NoFit, a UserError naming the smallest total it would need).
// `memory`, when given, is the exact footprint of a cell (stage k holding layers
// [first, last)) and replaces the sum of LayerCost::memory, asked of stages with a cap; kNeverFits
// there, over any cap, says the cell cannot be on stage k at all (a buffer its device cannot
// hold: pipeline::balance_within_limits asks it of every stage). `floor`, when given, is a
// bound under `memory` that is cheap to ask: a cell whose floor is over its stage's cap is not
// asked of `memory`.
using CellMemory = std::function<uint64_t(size_t stage, size_t first, size_t last)>;
inline constexpr uint64_t kNeverFits = ~uint64_t(0);
struct NoFit : UserError {
  using UserError::UserError;
};
Partition balance_min_max(const std::vector<LayerCost>& layers, const std::vector<StageSpec>& stages,
                          const CellMemory& memory = {}, const CellMemory& floor = {});

// A partition given by hand (3,5,4: layers per cell), checked against the layer count.
Partition balance_manual(const std::vector<LayerCost>& layers, const std::vector<StageSpec>& stages,
                         const std::vector<uint32_t>& sizes);

// Parses "3,5,4".
std::vector<uint32_t> parse_balance(const std::string& text);

}  // namespace brigade::pipeline
