#include "pipeline/schedule.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <tuple>

#include "vk/check.h"

namespace brigade::pipeline {

namespace {

// A builder's output: the compute actions (Forward, Backward, WeightGradient) of each stage
// in order; assemble() adds the receives, sends, recomputes and the step.
using Order = std::vector<std::vector<Action>>;

bool computes(Op op) {
  return op == Op::Forward || op == Op::Recompute || op == Op::Backward || op == Op::WeightGradient;
}

Schedule assemble(const ScheduleOptions& o, bool split, const Order& order) {
  Schedule s;
  s.kind = o.kind, s.stages = o.stages, s.micro_batches = o.micro_batches;
  s.virtual_stages = o.virtual_stages, s.split = split;
  s.actions.resize(o.stages);
  const uint32_t C = s.cells();
  for (uint32_t k = 0; k < o.stages; ++k) {
    auto& out = s.actions[k];
    // Per cell: the micro-batch whose activations the last Forward or Recompute wrote.
    std::vector<uint32_t> written(o.virtual_stages, UINT32_MAX);
    for (const Action& a : order[k]) {
      const uint32_t c = s.cell_of(k, a), i = a.micro_batch;
      switch (a.op) {
        case Op::Forward:
          if (c > 0) out.push_back({Op::RecvActivation, i, a.cell});
          out.push_back(a);
          if (c + 1 < C) out.push_back({Op::SendActivation, i, a.cell});
          written[a.cell] = i;
          break;
        case Op::Backward:
          if (c + 1 < C) out.push_back({Op::RecvGradient, i, a.cell});
          // except-last: recompute unless this micro-batch's activations are the last ones
          // the cell wrote (GPipe's last micro-batch, or 1F1B's on the last stage).
          if (o.remat == Remat::Always || (o.remat == Remat::ExceptLast && written[a.cell] != i)) {
            out.push_back({Op::Recompute, i, a.cell});
            written[a.cell] = i;
          }
          out.push_back(a);
          if (c > 0) out.push_back({Op::SendGradient, i, a.cell});
          break;
        default: out.push_back(a);
      }
    }
    out.push_back({Op::Step, 0, 0});
  }
  return s;
}

Order fill_drain(uint32_t K, uint32_t M) {
  Order order(K);
  for (uint32_t k = 0; k < K; ++k) {
    for (uint32_t i = 0; i < M; ++i) order[k].push_back({Op::Forward, i});
    for (uint32_t i = M; i-- > 0;) order[k].push_back({Op::Backward, i});
  }
  return order;
}

// PipeDream-flush: stage k runs K-1-k forwards ahead, then alternates one forward and one
// backward, then drains the backwards.
Order one_f_one_b_order(uint32_t K, uint32_t M) {
  Order order(K);
  for (uint32_t k = 0; k < K; ++k) {
    const uint32_t warmup = std::min(K - 1 - k, M);
    for (uint32_t i = 0; i < warmup; ++i) order[k].push_back({Op::Forward, i});
    for (uint32_t j = 0; j + warmup < M; ++j) {
      order[k].push_back({Op::Forward, warmup + j});
      order[k].push_back({Op::Backward, j});
    }
    for (uint32_t i = M - warmup; i < M; ++i) order[k].push_back({Op::Backward, i});
  }
  return order;
}

// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism"): 1F1B's forwards and input
// gradients, with stage k's parameter gradients held back k micro-batches in the steady
// phase, so later stages, whose B arrives first, send it on at once and fill the cooldown's
// waits with W. Every stage then holds up to K micro-batches in flight: 1F1B's peak (stage
// 0's), no more.
Order zero_bubble_order(uint32_t K, uint32_t M) {
  Order order(K);
  for (uint32_t k = 0; k < K; ++k) {
    auto& a = order[k];
    const uint32_t warmup = std::min(K - 1 - k, M);
    uint32_t next_w = 0;
    for (uint32_t i = 0; i < warmup; ++i) a.push_back({Op::Forward, i});
    for (uint32_t j = 0; j + warmup < M; ++j) {
      a.push_back({Op::Forward, warmup + j});
      a.push_back({Op::Backward, j});
      if (j >= k) a.push_back({Op::WeightGradient, next_w++});
    }
    for (uint32_t i = M - warmup; i < M; ++i) {
      a.push_back({Op::Backward, i});
      if (next_w <= i) a.push_back({Op::WeightGradient, next_w++});
    }
    while (next_w < M) a.push_back({Op::WeightGradient, next_w++});
  }
  return order;
}

// Megatron-LM's interleaved 1F1B: the M x V (micro-batch, cell) passes of a stage in groups
// of K micro-batches, cell by cell (backwards from the last cell); a warmup of
// 2(K-1-k) + (V-1)K forwards, then one forward and one backward.
Order interleaved_order(uint32_t K, uint32_t V, uint32_t M) {
  Order order(K);
  const uint32_t total = M * V;
  auto pass = [&](uint32_t j, Op op) {
    const uint32_t group = j / (K * V), r = j % (K * V);
    const uint32_t v = r / K;
    return Action{op, group * K + r % K, op == Op::Forward ? v : V - 1 - v};
  };
  for (uint32_t k = 0; k < K; ++k) {
    const uint32_t warmup = M == K ? total : std::min(2 * (K - 1 - k) + (V - 1) * K, total);
    for (uint32_t j = 0; j < warmup; ++j) order[k].push_back(pass(j, Op::Forward));
    for (uint32_t j = 0; j + warmup < total; ++j) {
      order[k].push_back(pass(warmup + j, Op::Forward));
      order[k].push_back(pass(j, Op::Backward));
    }
    for (uint32_t j = total - warmup; j < total; ++j) order[k].push_back(pass(j, Op::Backward));
  }
  return order;
}

std::string multiples(uint32_t K, uint32_t M) {
  const uint32_t below = M / K * K, above = below + K;
  return below ? "-m " + std::to_string(below) + " or -m " + std::to_string(above) : "-m " + std::to_string(above);
}

}  // namespace

Schedule build(const ScheduleOptions& o) {
  if (o.stages == 0 || o.micro_batches == 0)
    throw UserError("a pipeline needs at least one stage and one micro-batch");
  const uint32_t K = o.stages, M = o.micro_batches, V = o.virtual_stages;
  if (o.kind != Kind::Interleaved && V != 1)
    throw UserError("--virtual-stages " + std::to_string(V) + " needs --schedule interleaved; the " +
                    kind_name(o.kind) + " schedule runs one cell per stage");
  switch (o.kind) {
    case Kind::GPipe: return assemble(o, false, fill_drain(K, M));
    case Kind::OneFOneB: return assemble(o, false, one_f_one_b_order(K, M));
    case Kind::ZeroBubble: return assemble(o, true, zero_bubble_order(K, M));
    case Kind::Interleaved:
      if (V < 2)
        throw UserError("--schedule interleaved needs --virtual-stages 2 or more (with one cell per stage it is 1f1b)");
      if (M % K)
        throw UserError("--schedule interleaved runs micro-batches in groups of the " + std::to_string(K) +
                        " stages, and " + std::to_string(M) + " is not a multiple of " + std::to_string(K) +
                        ": use " + multiples(K, M));
      return assemble(o, false, interleaved_order(K, V, M));
  }
  throw UserError("unknown schedule");
}

Schedule gpipe(uint32_t stages, uint32_t micro_batches, Remat remat) {
  return build({Kind::GPipe, stages, micro_batches, 1, remat});
}

Schedule forward_only(const Schedule& training) {
  Schedule s = training;
  s.training = false, s.split = false;
  for (auto& a : s.actions)
    std::erase_if(a, [](const Action& x) {
      return x.op != Op::RecvActivation && x.op != Op::Forward && x.op != Op::SendActivation;
    });
  return s;
}

std::string to_string(const Action& a, bool cells) {
  std::string i = std::to_string(a.micro_batch);
  if (cells) i += "." + std::to_string(a.cell);
  switch (a.op) {
    case Op::RecvActivation: return "rA" + i;
    case Op::Forward: return "F" + i;
    case Op::SendActivation: return "sA" + i;
    case Op::RecvGradient: return "rG" + i;
    case Op::Recompute: return "R" + i;
    case Op::Backward: return "B" + i;
    case Op::SendGradient: return "sG" + i;
    case Op::WeightGradient: return "W" + i;
    case Op::Step: return "S";
  }
  return "?";
}

namespace {

std::string lines(const Schedule& s, bool transfers) {
  std::string out;
  for (uint32_t k = 0; k < s.actions.size(); ++k) {
    out += "stage " + std::to_string(k) + ":";
    for (auto& a : s.actions[k])
      if (transfers || computes(a.op) || a.op == Op::Step) out += " " + to_string(a, s.virtual_stages > 1);
    out += "\n";
  }
  return out;
}

}  // namespace

std::string to_string(const Schedule& s) { return lines(s, true); }
std::string compute_string(const Schedule& s) { return lines(s, false); }

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
  const uint32_t K = s.stages, C = s.cells();
  BRIGADE_EXPECT(forward.size() == C, "one forward time per cell");
  auto cost = [&](const Action& a, uint32_t c) {
    switch (a.op) {
      case Op::Forward:
      case Op::Recompute: return forward[c];
      case Op::Backward: return s.split ? forward[c] : 2 * forward[c];
      case Op::WeightGradient: return forward[c];
      default: return 0.0;
    }
  };
  // Finish times of F and B per (cell, micro-batch); a receive waits for its sender's.
  std::map<std::tuple<int, uint32_t, uint32_t>, double> finished;
  std::vector<size_t> pc(K, 0);
  std::vector<double> clock(K, 0), busy(K, 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (uint32_t k = 0; k < K; ++k)
      for (; pc[k] < s.actions[k].size(); ++pc[k], progress = true) {
        const Action& a = s.actions[k][pc[k]];
        const uint32_t c = s.cell_of(k, a), i = a.micro_batch;
        if (a.op == Op::RecvActivation || a.op == Op::RecvGradient) {
          const auto it = a.op == Op::RecvActivation ? finished.find({0, c - 1, i}) : finished.find({1, c + 1, i});
          if (it == finished.end()) break;
          clock[k] = std::max(clock[k], it->second);
          continue;
        }
        if (!computes(a.op)) continue;
        clock[k] += cost(a, c);
        busy[k] += cost(a, c);
        if (a.op == Op::Forward) finished[{0, c, i}] = clock[k];
        if (a.op == Op::Backward) finished[{1, c, i}] = clock[k];
      }
  }
  for (uint32_t k = 0; k < K; ++k)
    BRIGADE_EXPECT(pc[k] == s.actions[k].size(), "a schedule that deadlocks has no time");
  const double span = *std::max_element(clock.begin(), clock.end());
  double work = 0;
  for (double b : busy) work += b;
  return span > 0 ? 1.0 - work / (K * span) : 0.0;
}

double simulated_bubble(const Schedule& s) {
  return simulated_bubble(s, std::vector<double>(s.cells(), 1.0 / s.virtual_stages));
}

Slots assign_slots(const Schedule& s) {
  const uint32_t K = s.stages, V = s.virtual_stages;
  Slots out;
  out.input.resize(K), out.set.resize(K), out.deferred.resize(K);
  out.inputs.assign(s.cells(), 0), out.sets.assign(s.cells(), 0), out.deferreds.assign(s.cells(), 0);
  for (uint32_t k = 0; k < K; ++k) {
    const auto& acts = s.actions[k];
    const size_t n = acts.size();
    out.input[k].assign(n, Slots::kNone), out.set[k].assign(n, Slots::kNone), out.deferred[k].assign(n, Slots::kNone);
    // Last action using each (cell, micro-batch)'s input, and its activations.
    std::map<std::pair<uint32_t, uint32_t>, size_t> last_use, last_recompute;
    for (size_t x = 0; x < n; ++x)
      if (computes(acts[x].op)) {
        last_use[{acts[x].cell, acts[x].micro_batch}] = x;
        if (acts[x].op == Op::Recompute) last_recompute[{acts[x].cell, acts[x].micro_batch}] = x;
      }
    std::vector<std::set<uint32_t>> free_inputs(V), free_sets(V), free_deferred(V);
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> input_of, set_of, deferred_of;
    auto take = [](std::set<uint32_t>& free, uint32_t& count) {
      if (free.empty()) return count++;
      const uint32_t slot = *free.begin();
      free.erase(free.begin());
      return slot;
    };
    for (size_t x = 0; x < n; ++x) {
      const Action& a = acts[x];
      if (!computes(a.op)) continue;
      const std::pair<uint32_t, uint32_t> key{a.cell, a.micro_batch};
      const uint32_t c = s.cell_of(k, a);
      if (a.op == Op::Forward) input_of[key] = take(free_inputs[a.cell], out.inputs[c]);
      if (a.op == Op::Forward || a.op == Op::Recompute) set_of[key] = take(free_sets[a.cell], out.sets[c]);
      out.input[k][x] = input_of.at(key);
      out.set[k][x] = set_of.at(key);
      if (s.split && a.op == Op::Backward) deferred_of[key] = take(free_deferred[a.cell], out.deferreds[c]);
      if (s.split && (a.op == Op::Backward || a.op == Op::WeightGradient)) out.deferred[k][x] = deferred_of.at(key);
      if (a.op == Op::WeightGradient) free_deferred[a.cell].insert(deferred_of.at(key));
      // A Forward whose activations a later Recompute rebuilds keeps them no longer.
      const auto r = last_recompute.find(key);
      if (a.op == Op::Forward && r != last_recompute.end() && r->second > x) free_sets[a.cell].insert(set_of.at(key));
      if (last_use.at(key) == x) {
        free_inputs[a.cell].insert(input_of.at(key));
        free_sets[a.cell].insert(set_of.at(key));
      }
    }
  }
  return out;
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

Kind parse_kind(const std::string& text) {
  if (text == "gpipe") return Kind::GPipe;
  if (text == "1f1b") return Kind::OneFOneB;
  if (text == "interleaved") return Kind::Interleaved;
  if (text == "zb") return Kind::ZeroBubble;
  if (text == "constant" || text == "cosine")
    throw UserError("--schedule names the pipeline schedule (gpipe, 1f1b, interleaved or zb); the learning rate's is --lr-schedule " + text);
  throw UserError("--schedule: '" + text + "' is not a schedule; expected gpipe, 1f1b, interleaved or zb");
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::GPipe: return "gpipe";
    case Kind::OneFOneB: return "1f1b";
    case Kind::Interleaved: return "interleaved";
    case Kind::ZeroBubble: return "zb";
  }
  return "?";
}

}  // namespace brigade::pipeline
