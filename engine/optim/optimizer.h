// What every optimizer shares: the per-step values (learning rate from the schedule, clip
// coefficient from the gradient norm) and the registry of parameter tensors with their
// gradients and state buffers. An optimizer spans all stages: each stage records the
// updates of the parameters that live on its own device.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "vk/buffer.h"
#include "vk/commands.h"

namespace brigade::optim {

// What changes from one update to the next; the same for every parameter of every stage.
struct Step {
  uint64_t t = 1;         // 1 on the first update (torch's state["step"] after its increment)
  double lr = 0;          // this update's learning rate (optim::learning_rate)
  double grad_scale = 1;  // clip coefficient (optim::clip), applied to gradients as read
};

// One parameter tensor, its gradient (same length, same device) and its state buffers
// (Category::Optimizer, zero-initialized, in the order of the optimizer's state_keys()), as
// checkpoints name them.
struct Slot {
  std::string name;
  vk::View param, grad;
  uint32_t n = 0;  // floats
  std::vector<vk::Buffer> state;  // parts of the group's state arenas
};

// What one update pass covers: consecutive parts of a parameter arena (vk::Buffer::whole),
// with their gradients at the same offsets of a gradient arena and their state at the same
// offsets of state arenas the optimizer holds, the padding between them included (zeros,
// which stay zeros), no more of them than the device's maxStorageBufferRange binds (an arena
// larger than that takes several groups, which share its state arenas); or one tensor that
// is no part, with state of its own.
struct Group {
  vk::View param, grad;
  std::vector<vk::View> state;
  uint32_t n = 0;  // floats
  std::vector<std::shared_ptr<vk::Buffer>> arenas;  // the state, in state_keys() order
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Registers a parameter and its gradient and allocates its state on their device. A part
  // of an arena that follows the last one registered, in the same arenas, joins its group.
  void add(const std::string& name, vk::View param, vk::View grad);
  // Records one update of every registered parameter that lives on cmd's device.
  void record(vk::Commands& cmd, const Step& step) const;
  // The state buffers for checkpoints, named "<parameter>.<torch state key>", e.g.
  // "fc1.weight.exp_avg".
  std::vector<std::pair<std::string, const vk::Buffer*>> state() const;
  // Replaces one state buffer by the name state() gives it, on every copy of a parameter
  // tied across stages. Throws UserError for an unknown name or a wrong length.
  void load_state(const std::string& name, const std::vector<float>& values);
  const std::vector<Slot>& slots() const { return slots_; }

 protected:
  Optimizer() = default;
  // torch's per-parameter state keys, e.g. {"exp_avg", "exp_avg_sq"}; may be empty.
  virtual std::vector<std::string> state_keys() const = 0;
  virtual void record_group(vk::Commands& cmd, const Group& group, const Step& step) const = 0;

 private:
  std::vector<Group> groups_;  // before slots_: the slots' state lies in the groups' arenas
  std::vector<Slot> slots_;
};

}  // namespace brigade::optim
