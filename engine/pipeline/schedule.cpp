#include "pipeline/schedule.h"

#include <map>
#include <set>
#include <utility>

#include "vk/check.h"

namespace brigade::pipeline {

Schedule gpipe(uint32_t stages, uint32_t micro_batches, Remat remat) {
  if (stages == 0 || micro_batches == 0)
    throw UserError("a pipeline needs at least one stage and one micro-batch");
  Schedule s{stages, micro_batches, true, std::vector<std::vector<Action>>(stages)};
  const uint32_t last = micro_batches - 1;
  for (uint32_t k = 0; k < stages; ++k) {
    auto& a = s.actions[k];
    const bool first_stage = k == 0, last_stage = k + 1 == stages;
    for (uint32_t i = 0; i < micro_batches; ++i) {
      if (!first_stage) a.push_back({Op::RecvActivation, i});
      a.push_back({Op::Forward, i});
      if (!last_stage) a.push_back({Op::SendActivation, i});
    }
    for (uint32_t i = micro_batches; i-- > 0;) {
      if (!last_stage) a.push_back({Op::RecvGradient, i});
      // The last micro-batch's backward follows its forward directly: its activations are
      // still there under except-last, which is what makes that mode cheaper than always.
      if (remat == Remat::Always || (remat == Remat::ExceptLast && i != last))
        a.push_back({Op::Recompute, i});
      a.push_back({Op::Backward, i});
      if (!first_stage) a.push_back({Op::SendGradient, i});
    }
    a.push_back({Op::Step, 0});
  }
  return s;
}

Schedule forward_only(uint32_t stages, uint32_t micro_batches) {
  Schedule s = gpipe(stages, micro_batches, Remat::Never);
  s.training = false;
  for (auto& a : s.actions)
    std::erase_if(a, [](const Action& x) {
      return x.op != Op::RecvActivation && x.op != Op::Forward && x.op != Op::SendActivation;
    });
  return s;
}

std::string to_string(const Action& a) {
  const std::string i = std::to_string(a.micro_batch);
  switch (a.op) {
    case Op::RecvActivation: return "rA" + i;
    case Op::Forward: return "F" + i;
    case Op::SendActivation: return "sA" + i;
    case Op::RecvGradient: return "rG" + i;
    case Op::Recompute: return "R" + i;
    case Op::Backward: return "B" + i;
    case Op::SendGradient: return "sG" + i;
    case Op::Step: return "S";
  }
  return "?";
}

std::string to_string(const Schedule& s) {
  std::string out;
  for (uint32_t k = 0; k < s.actions.size(); ++k) {
    out += "stage " + std::to_string(k) + ":";
    for (auto& a : s.actions[k]) out += " " + to_string(a);
    out += "\n";
  }
  return out;
}

std::string check(const Schedule& s) {
  const uint32_t K = uint32_t(s.actions.size());
  // In flight: (kind, from stage, to stage, micro-batch); kind 0 = activation, 1 = gradient.
  std::multiset<std::tuple<int, uint32_t, uint32_t, uint32_t>> messages;
  std::vector<size_t> pc(K, 0);
  std::vector<std::set<uint32_t>> forwarded(K), backwarded(K);
  auto done = [&] {
    for (uint32_t k = 0; k < K; ++k)
      if (pc[k] < s.actions[k].size()) return false;
    return true;
  };
  while (!done()) {
    bool progress = false;
    for (uint32_t k = 0; k < K; ++k) {
      while (pc[k] < s.actions[k].size()) {
        const Action& a = s.actions[k][pc[k]];
        const uint32_t i = a.micro_batch;
        auto receive = [&](int kind, uint32_t from) {
          auto it = messages.find({kind, from, k, i});
          if (it == messages.end()) return false;
          messages.erase(it);
          return true;
        };
        bool ran = true;
        switch (a.op) {
          case Op::RecvActivation:
            if (k == 0) return "stage 0 receives an activation from no one";
            ran = receive(0, k - 1);
            break;
          case Op::SendActivation:
            if (k + 1 == K) return "the last stage sends an activation to no one";
            if (!forwarded[k].count(i)) return "stage " + std::to_string(k) + " sends A" + std::to_string(i) + " before computing it";
            messages.insert({0, k, k + 1, i});
            break;
          case Op::RecvGradient:
            if (k + 1 == K) return "the last stage receives a gradient from no one";
            ran = receive(1, k + 1);
            break;
          case Op::SendGradient:
            if (k == 0) return "stage 0 sends a gradient to no one";
            if (!backwarded[k].count(i)) return "stage " + std::to_string(k) + " sends G" + std::to_string(i) + " before computing it";
            messages.insert({1, k, k - 1, i});
            break;
          case Op::Forward: forwarded[k].insert(i); break;
          case Op::Backward:
            if (!forwarded[k].count(i)) return "stage " + std::to_string(k) + " runs B" + std::to_string(i) + " before F" + std::to_string(i);
            backwarded[k].insert(i);
            break;
          case Op::Recompute:
          case Op::Step: break;
        }
        if (!ran) break;
        ++pc[k];
        progress = true;
      }
    }
    if (!progress) {
      std::string where;
      for (uint32_t k = 0; k < K; ++k)
        if (pc[k] < s.actions[k].size())
          where += " stage " + std::to_string(k) + " waits at " + to_string(s.actions[k][pc[k]]) + ";";
      return "deadlock:" + where;
    }
  }
  if (!messages.empty()) return std::to_string(messages.size()) + " message(s) sent but never received";
  for (uint32_t k = 0; k < K; ++k)
    if (backwarded[k].size() != (s.training ? s.micro_batches : 0) || forwarded[k].size() != s.micro_batches)
      return "stage " + std::to_string(k) + (s.training ? " does not run every micro-batch forward and backward"
                                                        : " does not run every micro-batch forward, and only forward");
  return "";
}

Remat parse_remat(const std::string& text) {
  if (text == "never") return Remat::Never;
  if (text == "always") return Remat::Always;
  if (text == "except-last") return Remat::ExceptLast;
  throw UserError("--remat: '" + text + "' is not a mode; expected never, always or except-last");
}

const char* remat_name(Remat r) {
  switch (r) {
    case Remat::Never: return "never";
    case Remat::Always: return "always";
    case Remat::ExceptLast: return "except-last";
  }
  return "?";
}

}  // namespace brigade::pipeline
