#include "ops/form.h"

namespace brigade::ops {

Form form_for(const vk::PhysicalInfo& info) {
  return info.driver_id == VK_DRIVER_ID_GOOGLE_SWIFTSHADER ? Form::Direct : Form::Matrix;
}

}  // namespace brigade::ops
