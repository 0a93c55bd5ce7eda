// SGD with momentum, exactly torch.optim.SGD with dampening 0:
//   g = grad * grad_scale + weight_decay * param
//   if momentum: buf = g on the first step, else buf = momentum * buf + g
//                g = nesterov ? g + momentum * buf : buf
//   param -= lr * g
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optim/optimizer.h"
#include "vk/commands.h"

namespace brigade::optim {

struct SgdOptions {
  double momentum = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

// Throws UserError when the options are not what torch.optim.SGD accepts.
void validate(const SgdOptions& o);

// Records one update of n floats. param: (n) updated in place; grad: (n) read;
// momentum_buffer: (n) updated when o.momentum != 0, never touched otherwise (pass param).
// The first step (step.t == 1) sets the momentum buffer to the gradient, as torch does when
// it has none yet; a resumed run carries t on, so its buffer is kept.
void sgd_step(vk::Commands& cmd, vk::View param, vk::View grad, vk::View momentum_buffer,
              uint32_t n, const SgdOptions& o, const Step& step);

// State per parameter: "momentum_buffer" when momentum != 0, nothing otherwise.
class Sgd : public Optimizer {
 public:
  explicit Sgd(SgdOptions options);
  const SgdOptions& options() const { return options_; }

 protected:
  std::vector<std::string> state_keys() const override;
  void record_group(vk::Commands& cmd, const Group& group, const Step& step) const override;

 private:
  SgdOptions options_;
};

}  // namespace brigade::optim
