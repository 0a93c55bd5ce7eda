#include "ops/form.h"

#include <cstdlib>
#include <string>

#include "util/error.h"

namespace brigade::ops {

Form form_for(const vk::PhysicalInfo& info) {
  return info.driver_id == VK_DRIVER_ID_GOOGLE_SWIFTSHADER ? Form::Direct : Form::Matrix;
}

Form attention_form_for(const vk::PhysicalInfo& info) {
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
  // about half the time so (docs/BENCHMARKS.md).
  const Form f = form_for(info);
  return f == Form::Direct ? Form::Fused : f;
}

}  // namespace brigade::ops
