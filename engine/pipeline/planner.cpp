#include "pipeline/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "pipeline/plan.h"
#include "pipeline/simulate.h"
#include "util/error.h"

namespace brigade::pipeline {

std::vector<uint32_t> divisors(uint32_t n) {
  std::vector<uint32_t> out;
  for (uint32_t d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

std::vector<ScheduleChoice> all_schedules() {
  return {{ScheduleKind::GPipe, 1}, {ScheduleKind::OneFOneB, 1}, {ScheduleKind::ZeroBubble, 1},
          {ScheduleKind::Interleaved, 2}, {ScheduleKind::Interleaved, 4}};
}

namespace {

// One model of device: the same physical device, or another of the same model and driver.
bool same_model(const PlanDevice& a, const PlanDevice& b) {
  return a.model.empty() || b.model.empty() ? a.spec.physical == b.spec.physical : a.model == b.model;
}

// Whether swapping entries i and j changes nothing the search reads but their profiles' noise:
// one model under the same caps, compute shared alike (one resource, or each its own), and
// boundaries to and from every other entry alike (rates within a quarter of each other, the
// same pairs unlinkable).
bool interchangeable(const std::vector<PlanDevice>& pool, uint32_t i, uint32_t j, const Links& links) {
  const PlanDevice &a = pool[i], &b = pool[j];
  if (!same_model(a, b) || a.spec.memory_cap != b.spec.memory_cap || a.spec.device_memory != b.spec.device_memory ||
      a.precisions != b.precisions || a.multiplies != b.multiplies)
    return false;
  const auto alone = [&](uint32_t x) {
    return std::count_if(pool.begin(), pool.end(), [&](const PlanDevice& d) { return d.resource == pool[x].resource; }) == 1;
  };
  if (a.resource != b.resource && !(alone(i) && alone(j))) return false;
  const auto close = [](double u, double v) { return std::abs(u - v) <= 0.25 * std::max(u, v); };
  // From i to x against from j to y, x and y the same entry once i and j trade places.
  const auto alike = [&](uint32_t p, uint32_t x, uint32_t q, uint32_t y) {
    return (links.seconds_per_byte.empty() || close(links.seconds_per_byte[p][x], links.seconds_per_byte[q][y])) &&
           (links.unlinkable.empty() || links.unlinkable[p][x].empty() == links.unlinkable[q][y].empty());
  };
  for (uint32_t x = 0; x < pool.size(); ++x)
    if (x != i && x != j && (!alike(i, x, j, x) || !alike(x, i, x, j))) return false;
  return alike(i, j, j, i);
}

}  // namespace

void align_budgets(std::vector<PlanDevice>& pool) {
  std::vector<uint64_t> reported;
  for (const PlanDevice& d : pool) reported.push_back(d.spec.device_memory);
  for (size_t i = 0; i < pool.size(); ++i)
    for (size_t j = 0; j < pool.size(); ++j)
      if (!pool[i].model.empty() && pool[i].model == pool[j].model && reported[j] &&
          reported[j] < pool[i].spec.device_memory && reported[j] >= reported[i] - reported[i] / 10)
        pool[i].spec.device_memory = reported[j];
}

std::vector<std::vector<uint32_t>> device_orders(const std::vector<PlanDevice>& pool, uint32_t max_stages,
                                                 const Links& links) {
  const uint32_t P = uint32_t(pool.size());
  // Entry i stands for the interchangeable entries after it once those before it are used.
  std::vector<std::vector<bool>> same(P, std::vector<bool>(P, false));
  for (uint32_t i = 0; i < P; ++i)
    for (uint32_t j = 0; j < i; ++j) same[i][j] = interchangeable(pool, i, j, links);
  std::vector<std::vector<uint32_t>> out;
  std::vector<uint32_t> order;
  std::vector<bool> used(P, false);
  // Depth first, shorter pipelines before longer ones (ties in time go to fewer stages).
  for (uint32_t K = 1; K <= std::min(max_stages, P); ++K) {
    auto extend = [&](auto&& self) -> void {
      if (order.size() == K) {
        out.push_back(order);
        return;
      }
      for (uint32_t i = 0; i < P; ++i) {
        bool first = !used[i];
        for (uint32_t j = 0; first && j < i; ++j) first = used[j] || !same[i][j];
        if (!first) continue;
        used[i] = true, order.push_back(i);
        self(self);
        used[i] = false, order.pop_back();
      }
    };
    extend(extend);
  }
  return out;
}

namespace {

// Every per-stage choice of precision: the fixed one(s), or each device's candidates.
std::vector<std::vector<ops::Precision>> precision_choices(const SearchSpace& s, const std::vector<uint32_t>& devices) {
  const size_t K = devices.size();
  if (!s.precision.empty()) {
    if (s.precision.size() != 1 && s.precision.size() != K) return {};
    std::vector<ops::Precision> p(K);
    for (size_t k = 0; k < K; ++k)
      p[k] = s.precision[s.precision.size() == 1 ? 0 : k].value_or(s.pool[devices[k]].multiplies);
    return {p};
  }
  std::vector<std::vector<ops::Precision>> out{{}};
  for (uint32_t d : devices) {
    std::vector<std::vector<ops::Precision>> next;
    for (const auto& prefix : out)
      for (ops::Precision p : s.pool[d].precisions) {
        next.push_back(prefix);
        next.back().push_back(p);
      }
    out = std::move(next);
  }
  return out;
}

const LayerTimes& times_of(const PlanDevice& d, uint32_t rows, ops::Precision p) {
  const auto it = d.times.find({rows, p});
  BRIGADE_EXPECT(it != d.times.end(), "the planner has a profile of every micro-batch size and precision it tries");
  return it->second;
}

// How far over its memory the plan's fullest stage is (<= 1: it fits).
double over_ratio(const Plan& p, const std::vector<StageSpec>& stages, uint32_t optimizer_states) {
  double worst = 0;
  for (uint32_t k = 0; k < stages.size(); ++k) {
    const double bytes = double(total(p.stage_memory(k, optimizer_states)));
    for (uint64_t cap : {stages[k].memory_cap, stages[k].device_memory})  // a cap and the device's own
      if (cap) worst = std::max(worst, bytes / double(cap));
  }
  return worst;
}

}  // namespace

SearchResult search(const model::Model& m, const SearchSpace& s) {
  SearchResult r;
  const uint32_t L = uint32_t(m.layers.size());
  double closest = std::numeric_limits<double>::infinity();
  // Why a combination is refused: kept for the last tried of those of the most stages, the
  // nearest to running.
  size_t refused_stages = 0;
  for (const std::vector<uint32_t>& devices : s.device_orders) {
    const uint32_t K = uint32_t(devices.size());
    const auto refuse = [&](const std::string& why) {
      ++r.invalid;
      if (K >= refused_stages) refused_stages = K, r.refused = why;
    };
    // The boundary from stage k to k + 1, and from the last to the first (interleaved).
    const auto unlinked = [&](uint32_t k) -> const std::string& {
      static const std::string none;
      return s.links.unlinkable.empty() ? none : s.links.unlinkable[devices[k]][devices[(k + 1) % K]];
    };
    bool linked = true;
    for (uint32_t k = 0; k + 1 < K && linked; ++k)
      if (!unlinked(k).empty()) refuse(unlinked(k)), linked = false;
    if (!linked) continue;
    const std::vector<std::vector<ops::Precision>> precisions = precision_choices(s, devices);
    if (precisions.empty())
      refuse("`precision`: " + std::to_string(s.precision.size()) + " values for " + std::to_string(K) +
             " stages; give one for all or one per stage");
    for (uint32_t M : s.micro_batches)
      for (const ScheduleChoice& sc : s.schedules)
        for (Remat remat : s.remats)
          for (const std::vector<ops::Precision>& precision : precisions) {
            if (sc.virtual_stages > 1 && K < 2) {  // one stage's cells run in model order anyway
              refuse("`schedule` interleaved needs 2 stages or more (one stage's cells run in model order)");
              continue;
            }
            if (sc.virtual_stages > 1 && !unlinked(K - 1).empty()) {
              refuse(unlinked(K - 1));
              continue;
            }
            const uint32_t rows = split_rows(s.rows, M).front();
            PlanOptions o;
            o.rows = s.rows, o.micro_batches = M, o.remat = remat, o.schedule = sc.kind;
            o.virtual_stages = sc.virtual_stages, o.optimizer_states = s.optimizer_states;
            o.precision = precision, o.balance = s.balance, o.bubbles = false, o.training = s.training;
            for (uint32_t k = 0; k < K; ++k) {
              StageSpec st = s.pool[devices[k]].spec;
              st.layer_times = times_of(s.pool[devices[k]], rows, precision[k]).forward;
              const std::vector<double>& back = times_of(s.pool[devices[k]], rows, precision[k]).backward;
              for (uint32_t l = 0; l < L && s.training; ++l) st.layer_times[l] += back[l];
              o.stages.push_back(std::move(st));
            }
            Plan p;
            try {
              p = plan(m, o);
            } catch (const NoFit& e) {  // no cut under the caps: over memory, not a refused combination
              ++r.considered, ++r.over_memory;
              if (r.closest.empty()) r.closest = e.what();
              continue;
            } catch (const UserError& e) {  // K > L, interleaved with M not a multiple of K, ...
              refuse(e.what());
              continue;
            }
            ++r.considered;
            if (!p.problem.empty()) {
              ++r.over_memory;
              const double over = over_ratio(p, o.stages, s.optimizer_states);
              if (over < closest) closest = over, r.closest = p.problem;
              continue;
            }
            // Each cell's forward and backward on its stage's device, and each boundary's
            // transfer on its link.
            const uint32_t C = p.schedule.cells();
            ActionTimes t;
            for (uint32_t c = 0; c < C; ++c) {
              const uint32_t k = c % K;
              const LayerTimes& lt = times_of(s.pool[devices[k]], rows, precision[k]);
              const CellLayout& cell = p.cells[c];
              double f = 0, b = 0;
              for (uint32_t l = cell.first; l < cell.last; ++l) f += lt.forward[l], b += lt.backward[l];
              t.forward.push_back(f), t.backward.push_back(b);
              if (c + 1 == C) continue;
              const uint32_t from = devices[k], to = devices[(c + 1) % K];
              const uint64_t bytes = ops::stored_bytes(
                  model::elements(m.layers[cell.last - 1]->output_shape()) * rows, cell.output_precision.back());
              const double seconds =
                  from == to || s.links.seconds_per_byte.empty() ? 0.0 : double(bytes) * s.links.seconds_per_byte[from][to];
              t.activation.push_back(seconds), t.gradient.push_back(seconds);
            }
            for (uint32_t d : devices) t.resource.push_back(s.pool[d].resource);
            const Simulation sim = simulate(p.schedule, t);
            Candidate c{devices, M, sc, remat, precision, p.partition.sizes, sim.span, sim.bubble(), {}};
            for (uint32_t k = 0; k < K; ++k) c.peak.push_back(total(p.stage_memory(k, s.optimizer_states)));
            r.ranked.push_back(std::move(c));
            if (s.first_fit) return r;
          }
  }
  // Ties (to a part in a million of the best, which the order of summing alone can break)
  // keep the order tried: fewer stages, fewer micro-batches, simpler schedules, no
  // re-materialization and each device's preferred precision first.
  if (r.ranked.empty()) return r;
  auto rank = [&](const Candidate& c) {
    const bool half = std::any_of(c.precision.begin(), c.precision.end(), [](ops::Precision p) { return p != ops::Precision::Fp32; });
    return c.step_seconds * (half ? 1 + s.sixteen_bit_margin : 1);
  };
  double best = rank(r.ranked.front());
  for (const Candidate& c : r.ranked) best = std::min(best, rank(c));
  const double grain = best > 0 ? best * 1e-6 : 1.0;
  std::stable_sort(r.ranked.begin(), r.ranked.end(), [&](const Candidate& a, const Candidate& b) {
    return std::llround(rank(a) / grain) < std::llround(rank(b) / grain);
  });
  return r;
}

}  // namespace brigade::pipeline
