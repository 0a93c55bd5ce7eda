#include "ops/form.h"

#include <string>

#include "util/env.h"

namespace brigade::ops {

Form form_for(const vk::PhysicalInfo& info) {
  return info.driver_id == VK_DRIVER_ID_GOOGLE_SWIFTSHADER ? Form::Direct : Form::Matrix;
}

Form attention_form_for(bool half_on_matrix_units) {
  static const std::string mode = env_choice("BRIGADE_ATTENTION", {"auto", "matrix", "direct", "fused"});
  if (mode == "matrix") return Form::Matrix;
  if (mode == "direct") return Form::Direct;
  if (mode == "fused") return Form::Fused;
  // On matrix tiles, fused: an H200's bf16 gpt2-small step took 150.6 ms so against 180.5 in
  // the matrix form (docs/BENCHMARKS.md, "The H200 a third time"). Elsewhere the matrix form,
  // SwiftShader's too since its products' constants are folded: its attention there took 0.62x
  // to 0.87x the time of the row kernels staged in fp32, about 0.65x in bf16 (docs/BENCHMARKS.md,
  // "SwiftShader: the matrix kernel's constants folded on the host").
  return half_on_matrix_units ? Form::Fused : Form::Matrix;
}

}  // namespace brigade::ops
