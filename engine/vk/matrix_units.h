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
  // The kernels' warps are full subgroups of `lanes` invocations (fit_matrix_units): the width
  // the launchers size warps by and the kernels' LANES.
  bool full_subgroups = false;
  uint32_t lanes = 0;
  uint32_t required_subgroup_size = 0;  // what their pipelines require; 0: the device's one size
  bool usable() const { return !shapes.empty() && vulkan_memory_model && full_subgroups; }
  bool lists(MatrixShape::Element e) const;
  // Why listed shapes are not usable, in engine words ("" when they are, or none are listed).
  std::string unusable_why() const;
};

struct PhysicalInfo;

// How wide the cooperative-matrix kernels' warps are on `device`, from its subgroups: fills its
// matrix_units' full_subgroups, lanes and required_subgroup_size. Their pipelines require full
// subgroups (computeFullSubgroups). A device of one subgroup size (min == max: NVIDIA's 32) runs
// them in that size, requiring none. One of several must let a compute pipeline require one,
// and the kernels' pipelines require the chosen width: on Intel (8 or 16 to 32, its matrix
// units SIMD8 or SIMD16) the smallest size each listed matrix's m x n elements share evenly, as
// llama.cpp's ggml-vulkan takes the smallest for its matrix kernels there; elsewhere 32 where it
// is offered (AMD's RDNA3 multiplies matrices in wave32, its default wave 64), else the default.
void fit_matrix_units(PhysicalInfo& device);

// What the device lists; empty where it lacks the extension or fp16 arithmetic. The warps'
// width is left to fit_matrix_units.
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
