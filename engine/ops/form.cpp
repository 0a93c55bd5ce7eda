#include "ops/form.h"

namespace brigade::ops {

Form form_for(const vk::PhysicalInfo& info) {
  return info.driver_id == VK_DRIVER_ID_GOOGLE_SWIFTSHADER ? Form::Direct : Form::Matrix;
}

bool runs_direct(const vk::Commands& cmd, std::optional<Form> chosen) {
  return chosen.value_or(form_for(cmd.device().info())) == Form::Direct;
}

}  // namespace brigade::ops
