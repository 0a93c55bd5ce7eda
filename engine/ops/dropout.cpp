#include "ops/dropout.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "ops/launch_geometry.h"
#include "util/error.h"

namespace brigade::ops {

shaders::DropoutPush dropout_push(uint32_t n, float p, const DropoutKey& key) {
  if (!(p >= 0.0f && p < 1.0f)) {
    std::ostringstream msg;
    msg << "dropout probability " << p << " is outside [0, 1)";
    throw UserError(msg.str());
  }
  // Keep when the 32 random bits are >= p * 2^32: probability 1 - p up to 2^-32.
  const double threshold = std::min(std::round(double(p) * 4294967296.0), 4294967295.0);
  shaders::DropoutPush push{};
  push.n = n;
  push.threshold = uint32_t(threshold);
  push.scale = float(1.0 / (1.0 - double(p)));
  push.seed_lo = uint32_t(key.seed);
  push.seed_hi = uint32_t(key.seed >> 32);
  push.step = key.step;
  push.micro_batch = key.micro_batch;
  push.layer = key.layer;
  return push;
}

namespace {

void launch(vk::Commands& cmd, const char* shader, std::initializer_list<vk::View> bindings,
            uint32_t n, float p, const DropoutKey& key) {
  const shaders::DropoutPush push = dropout_push(n, p, key);
  if (n == 0) return;
  const uint32_t quads = vk::groups_for(n, BRIGADE_DROPOUT_PER_THREAD);
  cmd.dispatch(cmd.device().kernel(shader), bindings, push,
               capped_groups(quads, BRIGADE_WG_ELEMENTWISE));
}

}  // namespace

void dropout_forward(vk::Commands& cmd, vk::View x, vk::View y, uint32_t n, float p,
                     const DropoutKey& key) {
  launch(cmd, "dropout_forward", {x, y}, n, p, key);
}

void dropout_backward(vk::Commands& cmd, vk::View dy, vk::View dx, uint32_t n, float p,
                      const DropoutKey& key) {
  launch(cmd, "dropout_backward", {dy, dx}, n, p, key);
}

}  // namespace brigade::ops
