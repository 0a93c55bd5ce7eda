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
  // Compute pipelines may require full subgroups (VK_EXT_subgroup_size_control), and the
  // subgroup size is the one size the device runs: the kernels' warps are its subgroups.
  bool full_subgroups = false;
  bool usable() const { return !shapes.empty() && vulkan_memory_model && full_subgroups; }
  bool lists(MatrixShape::Element e) const;
};

// What the device lists; empty where it lacks the extension, fp16 arithmetic or the memory
// model the kernels use.
MatrixUnits describe_matrix_units(VkPhysicalDevice device, const std::vector<std::string>& extensions);

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
