// Where a plan passes what its stages may hold, said in one line with what to change: a
// stage over its cap, stages over their device's memory together, and what a device holds
// besides its memory: a kernel binds no buffer past the device's maxStorageBufferRange, and no
// allocation is past its maxMemoryAllocationSize (DeviceFacts). A cell whose buffers pass
// either is refused by the plan, before anything is allocated.
#pragma once

#include <cstdint>
#include <string>

#include "pipeline/plan.h"

namespace brigade::pipeline {

// Stage k, needing `b`, over its cap: how much over, the largest categories, what to change
// (the settings that shrink a stage in training, or in a plan for forward passes only).
std::string over_cap(uint32_t k, const Bytes& b, const StageSpec& spec, const PlanOptions& o);
// Whatever their caps, the stages on one physical device must fit its device-local memory
// together: what a driver would refuse, refused before anything is allocated; empty if they do.
std::string over_device_memory(const Plan& p, const PlanOptions& o);

// The first buffer of the cell its device cannot hold, as "tensor 'layer 2 output' is 181.4
// MiB, over this device's maxStorageBufferRange of 128.0 MiB, which binds it whole; use ...",
// naming what to change; empty when every buffer fits, or the limits are not known (0).
// Buffers a kernel binds whole: every tensor (the input, each layer's output and saved
// tensors, the activation gradients, the fp32 work's parts, each parameter and weight copy);
// allocations besides: the parameter, gradient, optimizer-state and weight-copy arenas (bound
// a window at a time), the scratch and the work.
std::string over_device_limits(const CellLayout& s, const DeviceFacts& facts, uint32_t optimizer_states);

// Sets p.over_limits, a stage's first such buffer, and where p.problem is empty, the first
// stage's as the problem, after `prefix`.
void note_over_limits(Plan& p, const PlanOptions& o, const std::string& prefix);

}  // namespace brigade::pipeline
