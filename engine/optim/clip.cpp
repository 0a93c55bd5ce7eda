#include "optim/clip.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "ops/launch_geometry.h"
#include "shaders/optim.h"
#include "util/error.h"

namespace brigade::optim {

Clip clip(double squared_sum, double max_norm) {
  if (!(max_norm > 0))
    throw UserError("gradient clipping: max_norm is " + std::to_string(max_norm) +
                    ", expected a positive number");
  Clip c;
  c.total_norm = std::sqrt(squared_sum);
  const double coef = max_norm / (c.total_norm + 1e-6);
  c.grad_scale = coef >= 1 ? 1.0 : coef;  // written so that a NaN coefficient stays NaN
  return c;
}

uint32_t grad_norm_groups(uint32_t n) {
  const uint32_t groups = vk::groups_for(n, BRIGADE_NORM_GROUP_ITEMS);
  return std::clamp<uint32_t>(groups, 1, BRIGADE_NORM_MAX_GROUPS);
}

void grad_norm_partial(vk::Commands& cmd, vk::View grad, vk::View partial, uint32_t n) {
  const uint32_t groups = grad_norm_groups(n);
  BRIGADE_EXPECT(partial.range >= groups * 4ull,
                       "grad_norm_partial: " + std::to_string(groups) + " partial sums need " +
                           std::to_string(groups * 4) + " bytes, the view has " +
                           std::to_string(partial.range));
  const bool vec4 = ops::quads(n, {grad});
  vk::Specialization spec = ops::reduction_spec(cmd.device(), uint64_t(n) / groups);
  spec.set(1, vec4);
  cmd.dispatch(cmd.device().kernel("grad_norm_partial", spec), {grad, partial}, shaders::GradNormPush{n},
               {groups});
}

void scale(vk::Commands& cmd, vk::View x, uint32_t n, float alpha) {
  cmd.dispatch(cmd.device().kernel("scale"), {x}, shaders::ScalePush{n, alpha},
               {vk::groups_for(n, BRIGADE_WG_OPTIM)});
}

GradNorm::GradNorm(vk::Device& device, std::vector<vk::View> grads) : grads_(std::move(grads)) {
  for (const vk::View& g : grads_) {
    BRIGADE_EXPECT(&g.buffer->device() == &device,
                         "GradNorm: gradient '" + g.buffer->name() + "' is on another device");
    BRIGADE_EXPECT(
        g.range % 4 == 0 && g.range > 0,
        "GradNorm: gradient '" + g.buffer->name() + "' is not a non-empty float tensor");
    const uint32_t groups = grad_norm_groups(uint32_t(g.range / 4));
    partials_.emplace_back(device, groups * 4ull, vk::Category::Scratch,
                           g.buffer->name() + " norm partials", vk::Residency::Host);
  }
}

void GradNorm::record(vk::Commands& cmd) const {
  for (size_t i = 0; i < grads_.size(); ++i)
    grad_norm_partial(cmd, grads_[i], partials_[i], uint32_t(grads_[i].range / 4));
}

double GradNorm::squared(std::vector<double>* each) const {
  double sum = 0;
  std::vector<float> partial;
  if (each) each->clear();
  for (const vk::Buffer& b : partials_) {
    partial.resize(b.size() / 4);
    vk::download(b, partial.data(), b.size());
    double own = 0;
    for (float p : partial) sum += p, own += p;
    if (each) each->push_back(own);
  }
  return sum;
}

}  // namespace brigade::optim
