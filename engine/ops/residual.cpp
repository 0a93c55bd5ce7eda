#include "ops/residual.h"

#include "shaders/elementwise.h"
#include "ops/launch_geometry.h"
#include "util/error.h"

namespace brigade::ops {

void residual_forward(vk::Commands& cmd, vk::View a, vk::View b, vk::View y, uint32_t n, Formats f) {
  BRIGADE_EXPECT(!(is_half(f.x) || is_half(f.y)) || quads(n, {a, b, y}),
                 "a 16-bit residual add needs whole quads (n % 4 == 0, 16-byte aligned views)");
  launch_vec4(cmd, format_kernel("residual_forward", {f.x, f.y}), {a, b, y}, n,
              vk::Specialization().set(1, uint32_t(f.x)).set(2, uint32_t(f.y)));
}

}  // namespace brigade::ops
