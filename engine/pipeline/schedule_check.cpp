// Checking a schedule without a GPU (every action's inputs arrive, in FIFO order per link,
// within the link slots), simulating its bubble, and assigning the slots of kept inputs and
// activation sets: what the executor and the planner read off a built schedule.
#include <algorithm>
#include <deque>
#include <queue>
#include <set>

#include "pipeline/schedule.h"
#include "pipeline/simulate.h"
#include "util/error.h"

namespace brigade::pipeline {

std::string check(const Schedule& s, uint32_t slots) {
  const uint32_t K = uint32_t(s.actions.size()), C = s.cells();
  if (K != s.stages || slots == 0) return "the schedule's shape is inconsistent";
  // Per boundary b (cell b <-> b+1) and kind (0 activations, 1 gradients): the micro-batches
  // sent and not yet received, in order, and the link slots taken.
  std::vector<std::array<std::deque<uint32_t>, 2>> queue(C);
  std::vector<std::array<uint32_t, 2>> taken(C, {0, 0});
  std::vector<size_t> pc(K, 0);
  // Per cell: micro-batches forwarded, backwarded (B), and with parameter gradients (W).
  std::vector<std::set<uint32_t>> forwarded(C), backwarded(C), weighted(C);
  auto name = [&](const Action& a) { return to_string(a, s.virtual_stages > 1); };
  auto where = [&](uint32_t k) { return "stage " + std::to_string(k) + " "; };
  while (true) {
    bool progress = false, done = true;
    for (uint32_t k = 0; k < K; ++k) {
      while (pc[k] < s.actions[k].size()) {
        const Action& a = s.actions[k][pc[k]];
        if (a.cell >= s.virtual_stages) return where(k) + "runs " + name(a) + " on a cell it does not hold";
        const uint32_t c = s.cell_of(k, a), i = a.micro_batch;
        if (a.op != Op::Step && i >= s.micro_batches) return where(k) + "runs " + name(a) + " past the last micro-batch";
        // A receive takes the next message of its link, which must be this micro-batch's.
        auto receive = [&](uint32_t boundary, int kind) -> std::optional<std::string> {
          auto& q = queue[boundary][kind];
          if (q.empty()) return std::nullopt;
          if (q.front() != i)
            return where(k) + "waits for " + name(a) + " but its link's next is micro-batch " + std::to_string(q.front());
          q.pop_front();
          return std::string();
        };
        bool ran = true;
        std::optional<std::string> got;
        switch (a.op) {
          case Op::RecvActivation:
            if (c == 0) return "the first cell receives an activation from no one";
            got = receive(c - 1, 0);
            if (got && !got->empty()) return *got;
            ran = got.has_value();
            break;
          case Op::RecvGradient:
            if (c + 1 == C) return "the last cell receives a gradient from no one";
            got = receive(c, 1);
            if (got && !got->empty()) return *got;
            ran = got.has_value();
            break;
          case Op::SendActivation:
            if (c + 1 == C) return "the last cell sends an activation to no one";
            if (!forwarded[c].count(i)) return where(k) + "sends A" + std::to_string(i) + " before computing it";
            queue[c][0].push_back(i);
            break;
          case Op::SendGradient:
            if (c == 0) return "the first cell sends a gradient to no one";
            if (!backwarded[c].count(i)) return where(k) + "sends G" + std::to_string(i) + " before computing it";
            queue[c - 1][1].push_back(i);
            break;
          case Op::Forward:
            // Writes its output into a link slot: waits while every slot is taken.
            if (c + 1 < C && taken[c][0] == slots) { ran = false; break; }
            if (forwarded[c].count(i)) return where(k) + "runs " + name(a) + " twice";
            if (c + 1 < C) ++taken[c][0];
            if (c > 0) --taken[c - 1][0];  // the received activation is copied out of its slot
            forwarded[c].insert(i);
            break;
          case Op::Backward:
            if (c > 0 && taken[c - 1][1] == slots) { ran = false; break; }
            if (!forwarded[c].count(i)) return where(k) + "runs " + name(a) + " before its forward";
            if (backwarded[c].count(i)) return where(k) + "runs " + name(a) + " twice";
            if (c > 0) ++taken[c - 1][1];
            if (c + 1 < C) --taken[c][1];
            backwarded[c].insert(i);
            break;
          case Op::WeightGradient:
            if (!s.split) return where(k) + "runs " + name(a) + " in a schedule whose backward is not split";
            if (!backwarded[c].count(i)) return where(k) + "runs " + name(a) + " before its backward";
            if (!weighted[c].insert(i).second) return where(k) + "runs " + name(a) + " twice";
            break;
          case Op::Recompute:
            if (!forwarded[c].count(i)) return where(k) + "recomputes micro-batch " + std::to_string(i) + " before its forward";
            break;
          case Op::Step:
            if (pc[k] + 1 != s.actions[k].size()) return where(k) + "steps before its last action";
            break;
        }
        if (!ran) break;
        ++pc[k];
        progress = true;
      }
      done = done && pc[k] == s.actions[k].size();
    }
    if (done) break;
    if (!progress) {
      std::string at;
      for (uint32_t k = 0; k < K; ++k)
        if (pc[k] < s.actions[k].size()) at += " " + where(k) + "waits at " + name(s.actions[k][pc[k]]) + ";";
      return "deadlock:" + at;
    }
  }
  for (uint32_t b = 0; b < C; ++b)
    if (!queue[b][0].empty() || !queue[b][1].empty()) return "a message is sent but never received";
  const uint32_t M = s.micro_batches;
  for (uint32_t c = 0; c < C; ++c) {
    const bool all = forwarded[c].size() == M && backwarded[c].size() == (s.training ? M : 0) &&
                     weighted[c].size() == (s.training && s.split ? M : 0);
    if (!all)
      return "cell " + std::to_string(c) +
             (s.training ? " does not run every micro-batch forward and backward" + std::string(s.split ? " and W" : "")
                         : " does not run every micro-batch forward, and only forward");
  }
  return "";
}

double simulated_bubble(const Schedule& s, const std::vector<double>& forward) {
  ActionTimes t;
  t.forward = forward;
  for (double f : forward) t.backward.push_back(2 * f);
  return simulate(s, t).bubble();
}

double simulated_bubble(const Schedule& s) {
  return simulated_bubble(s, std::vector<double>(s.cells(), 1.0 / s.virtual_stages));
}

Slots assign_slots(const Schedule& s) {
  const uint32_t K = s.stages, V = s.virtual_stages;
  Slots out;
  out.input.resize(K), out.set.resize(K), out.deferred.resize(K);
  out.inputs.assign(s.cells(), 0), out.sets.assign(s.cells(), 0), out.deferreds.assign(s.cells(), 0);
  // Per stage, indexed by (cell, micro-batch): flat vectors, not maps (a plan search assigns
  // the slots of every configuration, some with tens of thousands of micro-batches).
  uint32_t M = s.micro_batches;
  for (const auto& acts : s.actions)
    for (const Action& a : acts) M = std::max(M, a.micro_batch + 1);
  constexpr size_t kNever = SIZE_MAX;
  std::vector<size_t> last_use, last_recompute;
  std::vector<uint32_t> input_of, set_of, deferred_of;
  // The free slots of each cell: taken smallest first, each held once however often freed.
  struct Free {
    std::priority_queue<uint32_t, std::vector<uint32_t>, std::greater<>> slots;
    std::vector<bool> held;
    void put(uint32_t slot) {
      if (slot >= held.size()) held.resize(slot + 1, false);
      if (!held[slot]) held[slot] = true, slots.push(slot);
    }
    uint32_t take(uint32_t& count) {
      if (slots.empty()) return count++;
      const uint32_t slot = slots.top();
      slots.pop();
      held[slot] = false;
      return slot;
    }
  };
  for (uint32_t k = 0; k < K; ++k) {
    const auto& acts = s.actions[k];
    const size_t n = acts.size();
    out.input[k].assign(n, Slots::kNone), out.set[k].assign(n, Slots::kNone), out.deferred[k].assign(n, Slots::kNone);
    // Last action using each (cell, micro-batch)'s input, and its last Recompute (0: none).
    last_use.assign(size_t(V) * M, kNever), last_recompute.assign(size_t(V) * M, 0);
    input_of.assign(size_t(V) * M, Slots::kNone), set_of.assign(size_t(V) * M, Slots::kNone);
    deferred_of.assign(size_t(V) * M, Slots::kNone);
    auto at = [&](const Action& a) { return size_t(a.cell) * M + a.micro_batch; };
    for (size_t x = 0; x < n; ++x)
      if (computes(acts[x].op)) {
        last_use[at(acts[x])] = x;
        if (acts[x].op == Op::Recompute) last_recompute[at(acts[x])] = x;
      }
    std::vector<Free> free_inputs(V), free_sets(V), free_deferred(V);
    for (size_t x = 0; x < n; ++x) {
      const Action& a = acts[x];
      if (!computes(a.op)) continue;
      const size_t key = at(a);
      const uint32_t c = s.cell_of(k, a);
      if (a.op == Op::Forward) input_of[key] = free_inputs[a.cell].take(out.inputs[c]);
      if (a.op == Op::Forward || a.op == Op::Recompute) set_of[key] = free_sets[a.cell].take(out.sets[c]);
      BRIGADE_EXPECT(input_of[key] != Slots::kNone && set_of[key] != Slots::kNone,
                     "slots: " + to_string(a, V > 1) + " before its forward");
      out.input[k][x] = input_of[key];
      out.set[k][x] = set_of[key];
      if (s.split && a.op == Op::Backward) deferred_of[key] = free_deferred[a.cell].take(out.deferreds[c]);
      if (s.split && (a.op == Op::Backward || a.op == Op::WeightGradient)) {
        BRIGADE_EXPECT(deferred_of[key] != Slots::kNone, "slots: " + to_string(a, V > 1) + " before its backward");
        out.deferred[k][x] = deferred_of[key];
      }
      if (a.op == Op::WeightGradient) free_deferred[a.cell].put(deferred_of[key]);
      // A Forward whose activations a later Recompute rebuilds keeps them no longer.
      if (a.op == Op::Forward && last_recompute[key] > x)
        free_sets[a.cell].put(set_of[key]);
      if (last_use[key] == x) {
        free_inputs[a.cell].put(input_of[key]);
        free_sets[a.cell].put(set_of[key]);
      }
    }
  }
  return out;
}

}  // namespace brigade::pipeline
