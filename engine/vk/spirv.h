// Reads a compute shader's interface from its SPIR-V so descriptor layouts are derived,
// never written twice: how many storage buffers it binds and which of them it writes.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace brigade::vk {

struct ShaderInterface {
  uint32_t bindings = 0;      // storage buffers at set 0, bindings 0..bindings-1
  uint32_t written_mask = 0;  // bit b set when binding b is not declared readonly
  // Cooperative matrices (SPIR-V 1.5 with SPV_KHR_cooperative_matrix): the pipeline runs in
  // full subgroups, which is what makes the module valid before SPIR-V 1.6 and what the
  // kernel's warps rely on.
  bool full_subgroups = false;
  // The workgroup's size along x, y and z: LocalSize, or the WorkgroupSize built-in's
  // constants, each with the specialization constant that sets it (kNoSpec: none).
  static constexpr uint32_t kNoSpec = ~0u;
  std::array<uint32_t, 3> local_size{1, 1, 1};
  std::array<uint32_t, 3> local_size_spec{kNoSpec, kNoSpec, kNoSpec};
  // The workgroup's size under these specialization constants (constant_id -> value).
  std::array<uint32_t, 3> workgroup(const std::vector<std::pair<uint32_t, uint32_t>>& constants) const;
};

ShaderInterface reflect(std::span<const uint32_t> spirv, const std::string& shader);

// The SPIR-V of shaders/<name>.comp, embedded at build time; throws if there is none.
std::span<const uint32_t> shader_spirv(const std::string& name);
// Whether a shader variant is built in (the cooperative-matrix ones need tools/install-glslang.sh).
bool has_shader(const std::string& name);

}  // namespace brigade::vk
