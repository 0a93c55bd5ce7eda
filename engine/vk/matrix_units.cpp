#include "vk/matrix_units.h"

#include <algorithm>

#include "vk/physical.h"

namespace brigade::vk {
namespace {

// From the Vulkan registry (VK_KHR_cooperative_matrix, VK_KHR_shader_bfloat16).
constexpr auto kCooperativeFeatures = VkStructureType(1000506000);
constexpr auto kCooperativeProperties = VkStructureType(1000506001);
constexpr auto kBfloat16Features = VkStructureType(1000141000);
constexpr uint32_t kFloat16 = 0, kFloat32 = 1, kBfloat16 = 1000141000, kScopeSubgroup = 3;
constexpr const char* kCooperativeExtension = "VK_KHR_cooperative_matrix";
constexpr const char* kBfloat16Extension = "VK_KHR_shader_bfloat16";
constexpr uint32_t kIntel = 0x8086;

struct Properties {
  VkStructureType sType;
  void* pNext;
  uint32_t MSize, NSize, KSize;
  uint32_t AType, BType, CType, ResultType;
  VkBool32 saturatingAccumulation;
  uint32_t scope;
};
using ListProperties = VkResult(VKAPI_PTR*)(VkPhysicalDevice, uint32_t*, Properties*);

bool has(const std::vector<std::string>& extensions, const char* name) {
  return std::find(extensions.begin(), extensions.end(), name) != extensions.end();
}

}  // namespace

std::string MatrixShape::name() const {
  return std::string(element == Element::Bf16 ? "bf16 " : "fp16 ") + std::to_string(m) + "x" +
         std::to_string(n) + "x" + std::to_string(k);
}

bool MatrixUnits::lists(MatrixShape::Element e) const {
  return usable() && std::any_of(shapes.begin(), shapes.end(), [e](const MatrixShape& s) { return s.element == e; });
}

std::string MatrixUnits::unusable_why() const {
  if (shapes.empty() || usable()) return "";
  if (!vulkan_memory_model) return "the device lacks the Vulkan memory model at device scope, which the kernels declare";
  return "its compute pipelines can neither require full subgroups nor one subgroup size of several, which the "
         "kernels' warps need";
}

void fit_matrix_units(PhysicalInfo& device) {
  MatrixUnits& units = device.matrix_units;
  units.full_subgroups = false;
  units.lanes = units.required_subgroup_size = 0;
  if (!device.full_subgroups) return;
  if (device.min_subgroup_size == device.max_subgroup_size) {
    units.full_subgroups = true;
    units.lanes = device.subgroup_size;
    return;
  }
  if (!device.subgroup_size_control) return;
  const std::vector<uint32_t> sizes = subgroup_sizes(device);  // smallest first
  const auto offered = [&](uint32_t s) { return std::find(sizes.begin(), sizes.end(), s) != sizes.end(); };
  uint32_t lanes = 0;
  if (device.vendor_id == kIntel) {
    for (uint32_t s : sizes)
      if (std::all_of(units.shapes.begin(), units.shapes.end(),
                      [s](const MatrixShape& shape) { return shape.m * shape.n % s == 0; })) {
        lanes = s;
        break;
      }
  } else if (offered(32)) {
    lanes = 32;
  }
  if (!lanes && offered(device.subgroup_size)) lanes = device.subgroup_size;
  if (!lanes) return;
  units.full_subgroups = true;
  units.lanes = units.required_subgroup_size = lanes;
}

MatrixUnits describe_matrix_units(VkPhysicalDevice device, const std::vector<std::string>& extensions) {
  MatrixUnits units;
  if (!has(extensions, kCooperativeExtension)) return units;
  auto list = reinterpret_cast<ListProperties>(
      vkGetInstanceProcAddr(volkGetLoadedInstance(), "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
  if (!list) return units;

  MatrixUnitFeatures::Cooperative cooperative{kCooperativeFeatures};
  MatrixUnitFeatures::Bfloat16 bfloat16{kBfloat16Features};
  VkPhysicalDeviceVulkan12Features v12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  v12.pNext = &cooperative;
  if (has(extensions, kBfloat16Extension)) cooperative.pNext = &bfloat16;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &v12;
  vkGetPhysicalDeviceFeatures2(device, &features);
  if (!cooperative.cooperativeMatrix || !v12.shaderFloat16) return units;
  units.vulkan_memory_model = v12.vulkanMemoryModel && v12.vulkanMemoryModelDeviceScope;
  units.bf16 = bfloat16.shaderBFloat16Type && bfloat16.shaderBFloat16CooperativeMatrix;

  uint32_t n = 0;
  if (list(device, &n, nullptr) != VK_SUCCESS) return units;
  std::vector<Properties> props(n, Properties{kCooperativeProperties});
  if (list(device, &n, props.data()) != VK_SUCCESS) return units;
  for (const Properties& p : props) {
    const bool fp16 = p.AType == kFloat16 && p.BType == kFloat16;
    const bool bf16 = p.AType == kBfloat16 && p.BType == kBfloat16 && units.bf16;
    if ((fp16 || bf16) && p.CType == kFloat32 && p.ResultType == kFloat32 && p.scope == kScopeSubgroup &&
        !p.saturatingAccumulation)
      units.shapes.push_back({p.MSize, p.NSize, p.KSize, bf16 ? MatrixShape::Element::Bf16 : MatrixShape::Element::Fp16});
  }
  return units;
}

MatrixUnitFeatures::MatrixUnitFeatures(const MatrixUnits& units) : enabled_(units.usable()), bf16_(units.bf16) {
  if (!enabled_) return;
  extensions.push_back(kCooperativeExtension);
  cooperative_ = {kCooperativeFeatures, nullptr, VK_TRUE, VK_FALSE};
  if (bf16_) {
    extensions.push_back(kBfloat16Extension);
    bfloat16_ = {kBfloat16Features, nullptr, VK_TRUE, VK_FALSE, VK_TRUE};
  }
}

void* MatrixUnitFeatures::chain(void* next) {
  if (!enabled_) return next;
  if (bf16_) {
    bfloat16_.pNext = next;
    cooperative_.pNext = &bfloat16_;
  } else {
    cooperative_.pNext = next;
  }
  return &cooperative_;
}

}  // namespace brigade::vk
