#include "optim/optimizer.h"

#include <vector>

#include "util/error.h"

namespace brigade::optim {

void Optimizer::add(const std::string& name, vk::View param, vk::View grad) {
  BRIGADE_EXPECT(param.range == grad.range && param.range % 4 == 0 && param.range > 0,
                       name + ": parameter (" + std::to_string(param.range) +
                           " bytes) and gradient (" + std::to_string(grad.range) +
                           " bytes) must be the same non-empty float length");
  BRIGADE_EXPECT(&param.buffer->device() == &grad.buffer->device(),
                       name + ": parameter and gradient live on different devices");
  Slot slot{name, param, grad, uint32_t(param.range / 4), {}};
  vk::Device& dev = param.buffer->device();
  const std::vector<float> zeros(slot.n, 0.0f);
  for (const std::string& key : state_keys()) {
    vk::Buffer b(dev, param.range, vk::Category::Optimizer, name + "." + key);
    vk::upload(b, zeros.data(), param.range);
    slot.state.push_back(std::move(b));
  }
  slots_.push_back(std::move(slot));
}

void Optimizer::record(vk::Commands& cmd, const Step& step) const {
  BRIGADE_EXPECT(step.t >= 1, "optimizer steps count from 1");
  for (const Slot& s : slots_)
    if (&s.param.buffer->device() == &cmd.device()) record_slot(cmd, s, step);
}

std::vector<std::pair<std::string, const vk::Buffer*>> Optimizer::state() const {
  std::vector<std::pair<std::string, const vk::Buffer*>> out;
  const std::vector<std::string> keys = state_keys();
  for (const Slot& s : slots_)
    for (size_t k = 0; k < s.state.size(); ++k)
      out.emplace_back(s.name + "." + keys[k], &s.state[k]);
  return out;
}

void Optimizer::load_state(const std::string& name, const std::vector<float>& values) {
  const std::vector<std::string> keys = state_keys();
  bool found = false;
  for (Slot& s : slots_)
    for (size_t k = 0; k < s.state.size(); ++k) {
      if (s.name + "." + keys[k] != name) continue;
      if (values.size() != s.n)
        throw UserError("optimizer state '" + name + "' has " + std::to_string(s.n) + " elements, " +
                        std::to_string(values.size()) + " were given");
      vk::upload(s.state[k], values.data(), values.size() * sizeof(float));
      found = true;
    }
  if (!found) throw UserError("the optimizer has no state '" + name + "'");
}

}  // namespace brigade::optim
