// AdamW, exactly torch.optim.AdamW with amsgrad off; t counts steps from 1:
//   param *= 1 - lr * weight_decay
//   m = beta1 * m + (1 - beta1) * g            g = grad * grad_scale
//   v = beta2 * v + (1 - beta2) * g^2
//   param -= lr * m_hat / (sqrt(v_hat) + eps)  m_hat = m / (1 - beta1^t), v_hat = v / (1 - beta2^t)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optim/optimizer.h"
#include "vk/commands.h"

namespace brigade::optim {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

// Throws UserError when the options are not what torch.optim.AdamW accepts.
void validate(const AdamWOptions& o);

// Records one update of n floats. param: (n) updated in place; grad: (n) read;
// exp_avg: (n) and exp_avg_sq: (n) updated.
void adamw_step(vk::Commands& cmd, vk::View param, vk::View grad, vk::View exp_avg,
                vk::View exp_avg_sq, uint32_t n, const AdamWOptions& o, const Step& step);

// State per parameter: "exp_avg" and "exp_avg_sq".
class AdamW : public Optimizer {
 public:
  explicit AdamW(AdamWOptions options);
  const AdamWOptions& options() const { return options_; }

 protected:
  std::vector<std::string> state_keys() const override;
  void record_group(vk::Commands& cmd, const Group& group, const Step& step) const override;

 private:
  AdamWOptions options_;
};

}  // namespace brigade::optim
