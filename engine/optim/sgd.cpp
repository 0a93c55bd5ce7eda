#include "optim/sgd.h"

#include <cmath>

#include "ops/launch_geometry.h"
#include "shaders/optim.h"
#include "util/error.h"
#include "util/units.h"

namespace brigade::optim {

void validate(const SgdOptions& o) {
  if (!(o.momentum >= 0 && o.momentum < 1))
    throw UserError("SGD's `momentum` " + format_number(o.momentum) + " is not in [0, 1)");
  if (!(o.weight_decay >= 0 && std::isfinite(o.weight_decay)))
    throw UserError("SGD's `weight_decay` " + format_number(o.weight_decay) +
                    " is not a number of 0 or more");
  if (o.nesterov && o.momentum == 0) throw UserError("SGD's Nesterov momentum needs a `momentum` above 0");
}

void sgd_step(vk::Commands& cmd, vk::View param, vk::View grad, vk::View momentum_buffer,
              uint32_t n, const SgdOptions& o, const Step& step) {
  const bool momentum = o.momentum != 0;
  const vk::Kernel& k =
      cmd.device().kernel("sgd_step", vk::Specialization{}.set(0, momentum).set(1, o.nesterov));
  const shaders::SgdPush push{n,
                              float(step.lr),
                              float(o.momentum),
                              float(o.weight_decay),
                              float(step.grad_scale),
                              step.t == 1 ? 1u : 0u};
  // Without momentum the kernel never touches its third binding, but the layout still has
  // one; the parameter fills it. Binding a written buffer twice makes vk::Commands put a
  // barrier before the dispatch, a small price next to a separate shader.
  cmd.dispatch(k, {param, grad, momentum ? momentum_buffer : param}, push,
               ops::capped_groups(n, BRIGADE_WG_OPTIM));
}

Sgd::Sgd(SgdOptions options) : options_(options) { validate(options_); }

std::vector<std::string> Sgd::state_keys() const {
  if (options_.momentum == 0) return {};
  return {"momentum_buffer"};
}

void Sgd::record_group(vk::Commands& cmd, const Group& group, const Step& step) const {
  sgd_step(cmd, group.param, group.grad, group.state.empty() ? group.param : group.state[0], group.n, options_,
           step);
}

}  // namespace brigade::optim
