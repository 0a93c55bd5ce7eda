#include "pipeline/schedule.h"

#include <algorithm>

#include "util/error.h"

namespace brigade::pipeline {

namespace {

// A builder's output: the compute actions (Forward, Backward, WeightGradient) of each stage
// in order; assemble() adds the receives, sends, recomputes and the step.
using Order = std::vector<std::vector<Action>>;

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
  return below ? "`micro_batches` " + std::to_string(below) + " or " + std::to_string(above) : "`micro_batches` " + std::to_string(above);
}

}  // namespace

Schedule build(const ScheduleOptions& o) {
  if (o.stages == 0 || o.micro_batches == 0)
    throw UserError("a pipeline needs at least one stage and one micro-batch");
  const uint32_t K = o.stages, M = o.micro_batches, V = o.virtual_stages;
  if (o.kind != ScheduleKind::Interleaved && V != 1)
    throw UserError("`virtual_stages` " + std::to_string(V) + " needs `schedule` interleaved; the " +
                    schedule_kind_name(o.kind) + " schedule runs one cell per stage");
  switch (o.kind) {
    case ScheduleKind::GPipe: return assemble(o, false, fill_drain(K, M));
    case ScheduleKind::OneFOneB: return assemble(o, false, one_f_one_b_order(K, M));
    case ScheduleKind::ZeroBubble: return assemble(o, true, zero_bubble_order(K, M));
    case ScheduleKind::Interleaved:
      if (V < 2)
        throw UserError("`schedule` interleaved needs `virtual_stages` 2 or more (with one cell per stage it is 1f1b)");
      if (M % K)
        throw UserError("`schedule` interleaved runs micro-batches in groups of the " + std::to_string(K) +
                        " stages, and " + std::to_string(M) + " is not a multiple of " + std::to_string(K) +
                        ": use " + multiples(K, M));
      return assemble(o, false, interleaved_order(K, V, M));
  }
  throw UserError("unknown schedule");
}

Schedule gpipe(uint32_t stages, uint32_t micro_batches, Remat remat) {
  return build({ScheduleKind::GPipe, stages, micro_batches, 1, remat});
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

Schedule first_micro_batches(const Schedule& s, uint32_t m) {
  Schedule out = s;
  out.micro_batches = m;
  for (auto& a : out.actions) std::erase_if(a, [&](const Action& x) { return x.op != Op::Step && x.micro_batch >= m; });
  return out;
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

Remat parse_remat(const std::string& text) {
  if (text == "never") return Remat::Never;
  if (text == "always") return Remat::Always;
  if (text == "except-last") return Remat::ExceptLast;
  throw UserError("`remat`: '" + text + "' is not a mode; expected never, always or except-last");
}

const char* remat_name(Remat r) {
  switch (r) {
    case Remat::Never: return "never";
    case Remat::Always: return "always";
    case Remat::ExceptLast: return "except-last";
  }
  return "?";
}

ScheduleKind parse_schedule_kind(const std::string& text) {
  if (text == "gpipe") return ScheduleKind::GPipe;
  if (text == "1f1b") return ScheduleKind::OneFOneB;
  if (text == "interleaved") return ScheduleKind::Interleaved;
  if (text == "zb") return ScheduleKind::ZeroBubble;
  if (text == "constant" || text == "cosine")
    throw UserError("`schedule` names the pipeline schedule (gpipe, 1f1b, interleaved or zb); the learning rate's is `lr_schedule` " + text + ", a setting of training");
  throw UserError("`schedule`: '" + text + "' is not a schedule; expected gpipe, 1f1b, interleaved or zb");
}

const char* schedule_kind_name(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::GPipe: return "gpipe";
    case ScheduleKind::OneFOneB: return "1f1b";
    case ScheduleKind::Interleaved: return "interleaved";
    case ScheduleKind::ZeroBubble: return "zb";
  }
  return "?";
}

}  // namespace brigade::pipeline
