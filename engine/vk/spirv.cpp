#include "vk/spirv.h"

#include <map>
#include <set>

#include "vk/check.h"

namespace brigade::vk {
namespace {
// SPIR-V opcodes and decorations used here (SPIR-V spec, section 3).
constexpr uint32_t kOpCapability = 17, kCapabilityCooperativeMatrix = 6022;
constexpr uint32_t kOpExecutionMode = 16, kExecutionModeLocalSize = 17, kOpConstant = 43, kOpConstantComposite = 44,
                   kOpSpecConstant = 50, kOpSpecConstantComposite = 51, kDecorationSpecId = 1,
                   kDecorationBuiltIn = 11, kBuiltInWorkgroupSize = 25;
constexpr uint32_t kOpTypeStruct = 30, kOpTypePointer = 32, kOpVariable = 59, kOpDecorate = 71,
                   kOpMemberDecorate = 72;
constexpr uint32_t kDecorationBlock = 2, kDecorationBufferBlock = 3, kDecorationNonWritable = 24,
                   kDecorationBinding = 33, kDecorationDescriptorSet = 34;
constexpr uint32_t kStorageClassUniform = 2, kStorageClassStorageBuffer = 12;
}  // namespace

std::array<uint32_t, 3> ShaderInterface::workgroup(const std::vector<std::pair<uint32_t, uint32_t>>& constants) const {
  std::array<uint32_t, 3> size = local_size;
  for (size_t d = 0; d < 3; ++d)
    for (const auto& [id, value] : constants)
      if (id == local_size_spec[d]) size[d] = value;
  return size;
}

ShaderInterface reflect(std::span<const uint32_t> code, const std::string& shader) {
  auto bad = [&](const std::string& why) {
    return VulkanError("shader " + shader + ": " + why, VK_ERROR_INITIALIZATION_FAILED);
  };
  if (code.size() < 5 || code[0] != 0x07230203) throw bad("not SPIR-V");
  std::map<uint32_t, uint32_t> binding, set, pointee;  // id -> value / pointer -> type
  std::set<uint32_t> nonwritable, blocks;               // ids (variables or struct types)
  std::map<uint32_t, std::set<uint32_t>> struct_members;  // struct -> members decorated readonly
  std::map<uint32_t, uint32_t> member_count;
  std::map<uint32_t, std::pair<uint32_t, uint32_t>> variables;  // var -> (pointer type, class)
  bool cooperative = false;
  std::map<uint32_t, uint32_t> spec_id, constant;  // id -> SpecId / scalar constant's value
  std::map<uint32_t, std::vector<uint32_t>> composites;
  uint32_t workgroup_id = 0;  // the constant decorated WorkgroupSize, which overrides LocalSize
  std::array<uint32_t, 3> local_size{1, 1, 1};
  for (size_t i = 5; i < code.size();) {
    const uint32_t op = code[i] & 0xFFFF, n = code[i] >> 16;
    if (n == 0 || i + n > code.size()) throw bad("truncated instruction");
    const uint32_t* w = &code[i];
    if (op == kOpCapability && n >= 2) {
      cooperative |= w[1] == kCapabilityCooperativeMatrix;
    } else if (op == kOpDecorate && n >= 3) {
      if (w[2] == kDecorationBinding) binding[w[1]] = w[3];
      if (w[2] == kDecorationDescriptorSet) set[w[1]] = w[3];
      if (w[2] == kDecorationNonWritable) nonwritable.insert(w[1]);
      if (w[2] == kDecorationBlock || w[2] == kDecorationBufferBlock) blocks.insert(w[1]);
      if (w[2] == kDecorationSpecId && n >= 4) spec_id[w[1]] = w[3];
      if (w[2] == kDecorationBuiltIn && n >= 4 && w[3] == kBuiltInWorkgroupSize) workgroup_id = w[1];
    } else if (op == kOpExecutionMode && n >= 6 && w[2] == kExecutionModeLocalSize) {
      local_size = {w[3], w[4], w[5]};
    } else if ((op == kOpConstant || op == kOpSpecConstant) && n >= 4) {
      constant[w[2]] = w[3];
    } else if ((op == kOpConstantComposite || op == kOpSpecConstantComposite) && n >= 3) {
      composites[w[2]].assign(w + 3, w + n);
    } else if (op == kOpMemberDecorate && n >= 4 && w[3] == kDecorationNonWritable) {
      struct_members[w[1]].insert(w[2]);
    } else if (op == kOpTypeStruct) {
      member_count[w[1]] = n - 2;
    } else if (op == kOpTypePointer && n >= 4) {
      pointee[w[1]] = w[3];
    } else if (op == kOpVariable && n >= 4) {
      variables[w[2]] = {w[1], w[3]};
    }
    i += n;
  }
  ShaderInterface out;
  out.full_subgroups = cooperative;
  out.local_size = local_size;
  if (workgroup_id) {
    const std::vector<uint32_t>& parts = composites[workgroup_id];
    if (parts.size() != 3) throw bad("its WorkgroupSize is not a composite of three constants");
    for (size_t d = 0; d < 3; ++d) {
      if (!constant.count(parts[d])) throw bad("its WorkgroupSize is not made of scalar constants");
      out.local_size[d] = constant[parts[d]];
      if (spec_id.count(parts[d])) out.local_size_spec[d] = spec_id[parts[d]];
    }
  }
  std::set<uint32_t> seen;
  for (auto& [var, info] : variables) {
    auto [ptr, storage] = info;
    if (storage != kStorageClassStorageBuffer && storage != kStorageClassUniform) continue;
    if (!binding.count(var)) continue;
    if (set.count(var) && set[var] != 0) throw bad("uses descriptor set " + std::to_string(set[var]) + "; only set 0 is supported");
    const uint32_t b = binding[var], type = pointee[ptr];
    if (!blocks.count(type)) throw bad("binding " + std::to_string(b) + " is not a buffer block");
    if (b >= 32) throw bad("binding " + std::to_string(b) + " is over 31");
    seen.insert(b);
    const bool readonly = nonwritable.count(var) ||
                          (member_count.count(type) && struct_members.count(type) &&
                           struct_members[type].size() == member_count[type]);
    if (!readonly) out.written_mask |= 1u << b;
  }
  out.bindings = uint32_t(seen.size());
  if (!seen.empty() && *seen.rbegin() != out.bindings - 1)
    throw bad("bindings are not contiguous from 0");
  return out;
}

}  // namespace brigade::vk
