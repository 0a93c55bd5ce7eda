#include "optim/adamw.h"

#include <cmath>
#include <string>
#include <utility>

#include "ops/launch_geometry.h"
#include "shaders/optim.h"
#include "util/error.h"
#include "util/units.h"

namespace brigade::optim {

void validate(const AdamWOptions& o) {
  for (const auto& [name, beta] : {std::pair{"beta1", o.beta1}, std::pair{"beta2", o.beta2}})
    if (!(beta >= 0 && beta < 1))
      throw UserError(std::string("AdamW's `") + name + "` " + format_number(beta) +
                      " is not in [0, 1)");
  // 0 would divide 0 by 0 where a gradient is 0 (torch takes it, and gives NaN there).
  if (!(o.eps > 0 && std::isfinite(o.eps)))
    throw UserError("AdamW's `eps` " + format_number(o.eps) + " is not a number above 0");
  if (!(o.weight_decay >= 0 && std::isfinite(o.weight_decay)))
    throw UserError("AdamW's `weight_decay` " + format_number(o.weight_decay) +
                    " is not a number of 0 or more");
}

void adamw_step(vk::Commands& cmd, vk::View param, vk::View grad, vk::View exp_avg,
                vk::View exp_avg_sq, uint32_t n, const AdamWOptions& o, const Step& step) {
  BRIGADE_EXPECT(step.t >= 1, "adamw_step: steps count from 1");
  // The bias corrections are the same for every element, so they are computed once here, in
  // double: 1 - beta^t cancels badly in fp32 for small t (1 - 0.999f carries a 5e-5 relative
  // error), and the kernel then needs no pow.
  const double t = double(step.t);
  const double bias1 = 1 - std::pow(o.beta1, t), bias2 = 1 - std::pow(o.beta2, t);
  const shaders::AdamWPush push{n,
                                float(1 - step.lr * o.weight_decay),
                                float(o.beta1),
                                float(1 - o.beta1),
                                float(o.beta2),
                                float(1 - o.beta2),
                                float(o.eps),
                                float(step.lr / bias1),
                                float(std::sqrt(bias2)),
                                float(step.grad_scale)};
  const bool vec4 = ops::quads(n, {param, grad, exp_avg, exp_avg_sq});
  cmd.dispatch(cmd.device().kernel("adamw_step", vk::Specialization().set(0, vec4)),
               {param, grad, exp_avg, exp_avg_sq}, push,
               ops::capped_groups(vec4 ? n / 4 : n, BRIGADE_WG_OPTIM));
}

AdamW::AdamW(AdamWOptions options) : options_(options) { validate(options_); }

std::vector<std::string> AdamW::state_keys() const { return {"exp_avg", "exp_avg_sq"}; }

void AdamW::record_group(vk::Commands& cmd, const Group& group, const Step& step) const {
  adamw_step(cmd, group.param, group.grad, group.state[0], group.state[1], group.n, options_, step);
}

}  // namespace brigade::optim
