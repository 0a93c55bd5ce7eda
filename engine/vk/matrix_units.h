// Matrix units: the products a device runs with VK_KHR_cooperative_matrix, read from the
// device (never assumed), and what a device needs enabled to run them. Vulkan headers older
// than 1.3.255 lack the extension, so its few structures are declared here.
#pragma once

#include <volk.h>

#include <cstdint>
#include <string>
#include <vector>

namespace brigade::vk {

// One product shape a device lists for one subgroup: (m x k) times (k x n) of 16-bit floats
// into fp32 accumulators. Shapes of other types (integers, fp16 results) are not kept:
// Brigade's products take neither.
struct MatrixShape {
  enum class Element { Fp16, Bf16 };
  uint32_t m = 0, n = 0, k = 0;
  Element element = Element::Fp16;
  std::string name() const;  // e.g. "fp16 16x16x16"
};

struct MatrixUnits {
  std::vector<MatrixShape> shapes;
  // The cooperative-matrix kernels' SPIR-V declares the Vulkan memory model; enabled, it needs
  // its device scope too, which the other kernels' barriers use.
  bool vulkan_memory_model = false;
  bool bf16 = false;                 // VK_KHR_shader_bfloat16 with bf16 cooperative matrices
  // The kernels' warps are the device's subgroups, full ones (subgroup_fit).
  bool full_subgroups = false;
  uint32_t required_subgroup_size = 0;  // what their pipelines require; 0: the device's one size
  bool usable() const { return !shapes.empty() && vulkan_memory_model && full_subgroups; }
  bool lists(MatrixShape::Element e) const;
  // Why listed shapes are not usable, in engine words ("" when they are, or none are listed).
  std::string unusable_why() const;
};

// How the cooperative-matrix kernels' warps fit the device's subgroups. Their pipelines require
// full subgroups (`full`: VK_EXT_subgroup_size_control's computeFullSubgroups), each of the size
// the launchers size workgroups by, the device's default `size`. A device of one size (min ==
// max) runs them so as they are; one offering several sizes (AMD's 32 and 64, Intel's 8 to 32)
// must let a compute pipeline require one (`require`), and their pipelines require `size`.
struct SubgroupFit {
  bool full = false;      // the kernels can run
  uint32_t required = 0;  // the size their pipelines require; 0: none needed
};
SubgroupFit subgroup_fit(bool full, bool require, uint32_t min, uint32_t max, uint32_t size);

// What the device lists; empty where it lacks the extension or fp16 arithmetic. `subgroup_size`:
// the device's default subgroup size.
MatrixUnits describe_matrix_units(VkPhysicalDevice device, const std::vector<std::string>& extensions,
                                  uint32_t subgroup_size);

// The extensions and feature structures a logical device enables to run the cooperative-
// matrix kernels; `chain` links `features` into a device's create-info.
struct MatrixUnitFeatures {
  struct Cooperative {
    VkStructureType sType;
    void* pNext;
    VkBool32 cooperativeMatrix, cooperativeMatrixRobustBufferAccess;
  };
  struct Bfloat16 {
    VkStructureType sType;
    void* pNext;
    VkBool32 shaderBFloat16Type, shaderBFloat16DotProduct, shaderBFloat16CooperativeMatrix;
  };

  explicit MatrixUnitFeatures(const MatrixUnits& units);
  std::vector<const char*> extensions;
  void* chain(void* next);  // returns the head of the structures, `next` after them
  MatrixUnitFeatures(const MatrixUnitFeatures&) = delete;
  MatrixUnitFeatures& operator=(const MatrixUnitFeatures&) = delete;

 private:
  Cooperative cooperative_{};
  Bfloat16 bfloat16_{};
  bool enabled_ = false, bf16_ = false;
};

}  // namespace brigade::vk
