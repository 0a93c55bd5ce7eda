#include "ops/form.h"

#include <cstdlib>
#include <string>

#include "util/error.h"

namespace brigade::ops {

Form form_for(const vk::PhysicalInfo& info) {
  return info.driver_id == VK_DRIVER_ID_GOOGLE_SWIFTSHADER ? Form::Direct : Form::Matrix;
}

Form attention_form_for(const vk::PhysicalInfo& info, bool half_on_matrix_units) {
  static const std::string mode = [] {
    const char* env = std::getenv("BRIGADE_ATTENTION");
    const std::string m = env ? env : "auto";
    if (m != "auto" && m != "matrix" && m != "direct" && m != "fused")
      throw UserError("BRIGADE_ATTENTION is '" + m + "'; expected auto, matrix, direct or fused");
    return m;
  }();
  if (mode == "matrix") return Form::Matrix;
  if (mode == "direct") return Form::Direct;
  if (mode == "fused") return Form::Fused;
  // Where the direct form is the device's, staged: SwiftShader runs attention's kernels in
  // about half the time so. On matrix tiles, fused: an H200's bf16 gpt2-small step took 150.6
  // ms so against 180.5 in the matrix form (docs/BENCHMARKS.md, "The H200 a third time").
  const Form f = form_for(info);
  return f == Form::Direct || half_on_matrix_units ? Form::Fused : f;
}

}  // namespace brigade::ops
