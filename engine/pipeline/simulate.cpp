#include "pipeline/simulate.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "util/error.h"

namespace brigade::pipeline {

double Simulation::bubble() const {
  double work = 0;
  for (double b : busy) work += b;
  return span > 0 ? 1.0 - work / (double(busy.size()) * span) : 0.0;
}

Simulation simulate(const Schedule& s, const ActionTimes& t) {
  const uint32_t K = s.stages, C = s.cells();
  BRIGADE_EXPECT(t.forward.size() == C && t.backward.size() == C, "one forward and one backward time per cell");
  BRIGADE_EXPECT(t.activation.empty() || (t.activation.size() + 1 >= C && t.gradient.size() == t.activation.size()),
                 "one transfer time per boundary and direction");
  BRIGADE_EXPECT(t.resource.empty() || t.resource.size() == K, "one resource per stage");
  auto cost = [&](const Action& a, uint32_t c) {
    switch (a.op) {
      case Op::Forward:
      case Op::Recompute: return t.forward[c];
      case Op::Backward: return s.split ? t.backward[c] / 2 : t.backward[c];
      case Op::WeightGradient: return t.backward[c] / 2;
      default: return 0.0;
    }
  };
  auto transfer = [&](const std::vector<double>& v, uint32_t boundary) { return v.empty() ? 0.0 : v[boundary]; };
  const double never = std::numeric_limits<double>::infinity();
  // When a receive's data is there: the sender's F or B finished, plus the transfer; by
  // direction (0: activation, 1: gradient), receiving cell and micro-batch.
  const uint32_t M = s.micro_batches;
  std::vector<double> arrives(size_t(2) * C * M, never);
  auto arrival = [&](int direction, uint32_t c, uint32_t mb) -> double& {
    BRIGADE_EXPECT(mb < M, "a micro-batch of the schedule's");
    return arrives[(size_t(direction) * C + c) * M + mb];
  };
  std::vector<size_t> pc(K, 0);
  std::vector<double> clock(K, 0);
  // When each stage's resource is free (stages of one resource share an entry).
  std::vector<uint32_t> resource(K);
  for (uint32_t k = 0; k < K; ++k) {
    resource[k] = k;
    for (uint32_t j = 0; j < k && !t.resource.empty(); ++j)
      if (t.resource[j] == t.resource[k]) { resource[k] = resource[j]; break; }
  }
  std::vector<double> free_at(K, 0.0);
  Simulation out;
  out.busy.assign(K, 0);
  while (true) {
    // Receives and sends cost no stage time: take them as soon as they can go.
    for (uint32_t k = 0; k < K; ++k)
      for (; pc[k] < s.actions[k].size(); ++pc[k]) {
        const Action& a = s.actions[k][pc[k]];
        const uint32_t c = s.cell_of(k, a);
        if (a.op == Op::RecvActivation || a.op == Op::RecvGradient) {
          const double at = arrival(a.op == Op::RecvActivation ? 0 : 1, c, a.micro_batch);
          if (at == never) break;
          clock[k] = std::max(clock[k], at);
        } else if (computes(a.op)) {
          break;
        }
      }
    uint32_t next = K;
    double start = never;
    for (uint32_t k = 0; k < K; ++k) {
      if (pc[k] == s.actions[k].size() || !computes(s.actions[k][pc[k]].op)) continue;
      const double at = std::max(clock[k], free_at[resource[k]]);
      if (at < start) start = at, next = k;
    }
    if (next == K) break;
    const Action& a = s.actions[next][pc[next]++];
    const uint32_t c = s.cell_of(next, a);
    const double end = start + cost(a, c);
    clock[next] = end;
    out.busy[next] += cost(a, c);
    free_at[resource[next]] = end;
    if (a.op == Op::Forward && c + 1 < C) arrival(0, c + 1, a.micro_batch) = end + transfer(t.activation, c);
    if (a.op == Op::Backward && c > 0) arrival(1, c - 1, a.micro_batch) = end + transfer(t.gradient, c - 1);
  }
  for (uint32_t k = 0; k < K; ++k)
    BRIGADE_EXPECT(pc[k] == s.actions[k].size(), "a schedule that deadlocks has no time");
  out.span = *std::max_element(clock.begin(), clock.end());
  return out;
}

}  // namespace brigade::pipeline
