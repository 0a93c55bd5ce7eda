// Specialization constants folded into a shader's SPIR-V on the host, for drivers that compile
// them as values read at run time (SwiftShader): there a loop bounded by one is not unrolled and
// an array sized by one stays in memory, indexed lane by lane, so the matrix kernel's register
// blocks ran 5 to 8 times slower than with the same numbers written in (docs/DRIVERS.md). With
// the constants set and frozen, the driver's own optimizer sees plain constants.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "vk/kernel.h"

namespace brigade::vk {

// Whether this build folds (the sanitized build does not: CMakeLists.txt). Where it does not,
// no device folds, whatever it needs (PhysicalInfo::specialize_on_host stays false).
bool folds_on_host();

// `spirv` with every constant of `spec` set to its value and every specialization constant
// (given or left at its default) made an ordinary constant, the expressions on them folded.
// The module needs no specialization info after it. `shader` names it in an error.
std::vector<uint32_t> specialize(std::span<const uint32_t> spirv, const Specialization& spec,
                                 const std::string& shader);

}  // namespace brigade::vk
