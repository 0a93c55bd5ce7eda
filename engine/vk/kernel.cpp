#include "vk/kernel.h"

#include "vk/check.h"
#include "vk/device.h"
#include "vk/specialize.h"
#include "vk/spirv.h"
#include "util/error.h"

namespace brigade::vk {

std::string Specialization::key() const {
  std::string k;
  for (auto& [id, v] : constants) k += "|" + std::to_string(id) + "=" + std::to_string(v);
  return k;
}

void check_subgroups(const PhysicalInfo& device, const std::string& kernel, const std::array<uint32_t, 3>& workgroup,
                     uint32_t required, bool full) {
  const uint64_t invocations = uint64_t(workgroup[0]) * workgroup[1] * workgroup[2];
  const std::string size = std::to_string(workgroup[0]) + "x" + std::to_string(workgroup[1]) + "x" +
                           std::to_string(workgroup[2]);
  const uint64_t most = uint64_t(required) * device.max_compute_workgroup_subgroups;
  if (required && device.max_compute_workgroup_subgroups && invocations > most)
    throw UserError("kernel " + kernel + ": a workgroup of " + size + " invocations in subgroups of " +
                    std::to_string(required) + " is more than the " +
                    std::to_string(device.max_compute_workgroup_subgroups) + " subgroups a workgroup " + device.name +
                    " allows (maxComputeWorkgroupSubgroups): at most " + std::to_string(most) + " invocations");
  if (full && workgroup[0] % (required ? required : device.max_subgroup_size))
    throw UserError("kernel " + kernel + ": a workgroup of " + size + " invocations cannot run in full subgroups of " +
                    std::to_string(required ? required : device.max_subgroup_size) + " on " + device.name +
                    ": its x is not a multiple of that size");
}

Kernel::Kernel(Device& device, const std::string& shader, const Specialization& spec)
    : device_(device), name_(shader + spec.key()) {
  std::span<const uint32_t> code = shader_spirv(shader);
  const ShaderInterface iface = reflect(code, shader);
  // The subgroups it requires: the device's test option's, else a cooperative-matrix kernel's
  // (its warps are subgroups of the size the launchers size them by), else the launcher's.
  uint32_t required_size = device.required_subgroup_size();
  if (!required_size && iface.full_subgroups) required_size = device.info().matrix_units.required_subgroup_size;
  if (!required_size) required_size = spec.subgroup_size;
  const bool full = iface.full_subgroups || (spec.subgroup_size && spec.subgroup_size == required_size);
  check_subgroups(device.info(), name_, iface.workgroup(spec.constants), required_size, full);
  // The cooperative-matrix modules are never folded: no driver that needs it has matrix
  // units, and Debian 12's SPIR-V optimizer predates them.
  const bool fold = spec.fold && device.info().specialize_on_host && !spec.constants.empty() && !iface.full_subgroups;
  std::vector<uint32_t> folded;
  if (fold) {
    folded = specialize(code, spec, shader);
    code = folded;
    name_ += "|folded";
  }
  bindings_ = iface.bindings;
  written_mask_ = iface.written_mask;
  const auto& vk = device.vk();
  const VkDevice dev = device.handle();

  std::vector<VkDescriptorSetLayoutBinding> binds(bindings_);
  for (uint32_t b = 0; b < bindings_; ++b)
    binds[b] = {b, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  set_info.bindingCount = bindings_;
  set_info.pBindings = binds.data();
  VK_CHECK(vk.vkCreateDescriptorSetLayout(dev, &set_info, nullptr, &set_layout_));

  VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, kMaxPushBytes};
  VkPipelineLayoutCreateInfo layout_info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &set_layout_;
  layout_info.pushConstantRangeCount = 1;
  layout_info.pPushConstantRanges = &push;
  VK_CHECK(vk.vkCreatePipelineLayout(dev, &layout_info, nullptr, &layout_));

  VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  module_info.codeSize = code.size() * sizeof(uint32_t);
  module_info.pCode = code.data();
  VkShaderModule module = VK_NULL_HANDLE;
  VK_CHECK(vk.vkCreateShaderModule(dev, &module_info, nullptr, &module));

  std::vector<VkSpecializationMapEntry> entries;
  std::vector<uint32_t> values;
  for (auto& [id, v] : spec.constants) {
    entries.push_back({id, uint32_t(values.size() * sizeof(uint32_t)), sizeof(uint32_t)});
    values.push_back(v);
  }
  VkSpecializationInfo spec_info{uint32_t(entries.size()), entries.data(),
                                 values.size() * sizeof(uint32_t), values.data()};
  VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  info.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = module;
  info.stage.pName = "main";
  info.stage.pSpecializationInfo = entries.empty() || fold ? nullptr : &spec_info;
  VkPipelineShaderStageRequiredSubgroupSizeCreateInfo required{
      VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO};
  required.requiredSubgroupSize = required_size;
  if (required_size) info.stage.pNext = &required;
  if (full) info.stage.flags |= VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT_EXT;
  info.layout = layout_;
  const VkResult r = vk.vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &info, nullptr, &pipeline_);
  vk.vkDestroyShaderModule(dev, module, nullptr);
  VK_CHECK(r);
  device.name(VK_OBJECT_TYPE_PIPELINE, pipeline_, name_);
  device.name(VK_OBJECT_TYPE_PIPELINE_LAYOUT, layout_, name_ + " layout");
  device.name(VK_OBJECT_TYPE_DESCRIPTOR_SET_LAYOUT, set_layout_, name_ + " bindings");
}

Kernel::~Kernel() {
  const auto& vk = device_.vk();
  vk.vkDestroyPipeline(device_.handle(), pipeline_, nullptr);
  vk.vkDestroyPipelineLayout(device_.handle(), layout_, nullptr);
  vk.vkDestroyDescriptorSetLayout(device_.handle(), set_layout_, nullptr);
}

}  // namespace brigade::vk
