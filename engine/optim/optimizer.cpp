#include "optim/optimizer.h"

#include <algorithm>
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
  vk::Device& dev = param.buffer->device();
  const vk::Buffer &pw = param.buffer->whole(), &gw = grad.buffer->whole();
  const uint64_t at = param.buffer->offset_in_whole();
  // A whole part of a parameter arena, its gradient the same part of a gradient arena.
  const bool part = &pw != param.buffer && &gw != grad.buffer && param.offset == 0 && grad.offset == 0 &&
                    param.range == param.buffer->size() && at == grad.buffer->offset_in_whole() &&
                    pw.size() == gw.size();
  // A part's group reaches the end of its padding.
  const uint64_t end = part ? std::min(vk::arena_align(at + param.range), pw.size()) : param.range;
  // A kernel binds a group as one view: a group stays within the device's
  // maxStorageBufferRange, so an arena of any size takes as many groups as that needs.
  const uint64_t widest = dev.info().max_storage_buffer_range;
  Group* g = groups_.empty() ? nullptr : &groups_.back();
  if (part && g && g->param.buffer == &pw && g->grad.buffer == &gw &&
      at == g->param.offset + uint64_t(g->n) * 4 && end - g->param.offset <= widest) {  // joins the last group
    g->n = uint32_t((end - g->param.offset) / 4);
    g->param.range = g->grad.range = end - g->param.offset;
    for (vk::View& v : g->state) v.range = g->param.range;
  } else {
    const uint64_t begin = part ? at : 0;
    Group fresh{part ? vk::View(pw, begin, end - begin) : param, part ? vk::View(gw, begin, end - begin) : grad,
                {}, uint32_t((end - begin) / 4), {}};
    // State arenas as long as the parameter arena, shared by its groups, or the tensor's own.
    const auto same_arena = std::find_if(groups_.rbegin(), groups_.rend(), [&](const Group& o) {
      return part && o.param.buffer == &pw && o.grad.buffer == &gw;
    });
    if (same_arena != groups_.rend()) fresh.arenas = same_arena->arenas;
    else
      for (const std::string& key : state_keys()) {
        const uint64_t bytes = part ? pw.size() : param.range;
        auto arena = std::make_shared<vk::Buffer>(dev, bytes, vk::Category::Optimizer,
                                                  part ? pw.name() + " " + key : name + "." + key);
        vk::zero(*arena);
        fresh.arenas.push_back(std::move(arena));
      }
    for (const std::shared_ptr<vk::Buffer>& arena : fresh.arenas) fresh.state.emplace_back(*arena, begin, end - begin);
    groups_.push_back(std::move(fresh));
    g = &groups_.back();
  }
  Slot slot{name, param, grad, uint32_t(param.range / 4), {}};
  const std::vector<std::string> keys = state_keys();
  for (size_t k = 0; k < keys.size(); ++k)
    slot.state.emplace_back(*g->arenas[k], part ? at : 0, param.range, name + "." + keys[k]);
  slots_.push_back(std::move(slot));
}

void Optimizer::record(vk::Commands& cmd, const Step& step) const {
  BRIGADE_EXPECT(step.t >= 1, "optimizer steps count from 1");
  for (const Group& g : groups_)
    if (&g.param.buffer->device() == &cmd.device()) record_group(cmd, g, step);
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
      // A second moment is a mean of squares: a negative one takes the step's square root of it.
      if (keys[k] == "exp_avg_sq" && std::any_of(values.begin(), values.end(), [](float v) { return v < 0; }))
        throw UserError("optimizer state '" + name + "' holds negative values (a mean of squares)");
      vk::upload(s.state[k], values.data(), values.size() * sizeof(float));
      found = true;
    }
  if (!found) throw UserError("the optimizer has no state '" + name + "'");
}

}  // namespace brigade::optim
