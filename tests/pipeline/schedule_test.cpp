#include <doctest/doctest.h>

#include <algorithm>

#include "pipeline/plan.h"
#include "pipeline/schedule.h"
#include "util/error.h"

namespace pipeline_schedule_test {

using namespace brigade;
using namespace brigade::pipeline;

TEST_CASE("gpipe schedule prints as fill then drain") {
  const Schedule s = gpipe(2, 3, Remat::Never);
  CHECK(to_string(s) ==
        "stage 0: F0 sA0 F1 sA1 F2 sA2 rG2 B2 rG1 B1 rG0 B0 S\n"
        "stage 1: rA0 F0 rA1 F1 rA2 F2 B2 sG2 B1 sG1 B0 sG0 S\n");
}

TEST_CASE("every stage runs each micro-batch forward once and backward once, in GPipe order") {
  for (uint32_t K : {1u, 2u, 4u, 8u})
    for (uint32_t M : {1u, 2u, 4u, 8u, 32u}) {
      const Schedule s = gpipe(K, M, Remat::Never);
      REQUIRE(s.actions.size() == K);
      for (uint32_t k = 0; k < K; ++k) {
        std::vector<uint32_t> fwd, bwd;
        for (auto& a : s.actions[k]) {
          if (a.op == Op::Forward) fwd.push_back(a.micro_batch);
          if (a.op == Op::Backward) bwd.push_back(a.micro_batch);
        }
        std::vector<uint32_t> want(M);
        for (uint32_t i = 0; i < M; ++i) want[i] = i;
        CHECK(fwd == want);
        std::reverse(want.begin(), want.end());
        CHECK(bwd == want);
        // All forwards come before the first backward, and the step comes last.
        auto first_b = std::find_if(s.actions[k].begin(), s.actions[k].end(), [](auto& a) { return a.op == Op::Backward; });
        CHECK(std::none_of(first_b, s.actions[k].end(), [](auto& a) { return a.op == Op::Forward; }));
        CHECK(s.actions[k].back().op == Op::Step);
        CHECK(std::count_if(s.actions[k].begin(), s.actions[k].end(), [](auto& a) { return a.op == Op::Step; }) == 1);
      }
    }
}

TEST_CASE("sends and receives pair up and the schedule never deadlocks") {
  for (uint32_t K : {1u, 2u, 3u, 4u, 8u})
    for (uint32_t M : {1u, 2u, 5u, 8u})
      for (Remat r : {Remat::Never, Remat::Always, Remat::ExceptLast}) {
        const Schedule s = gpipe(K, M, r);
        INFO("K=", K, " M=", M, " remat=", remat_name(r));
        CHECK(check(s, kLinkSlots) == "");
        size_t sends = 0, recvs = 0;
        for (auto& st : s.actions)
          for (auto& a : st) {
            sends += a.op == Op::SendActivation || a.op == Op::SendGradient;
            recvs += a.op == Op::RecvActivation || a.op == Op::RecvGradient;
          }
        CHECK(sends == 2u * (K - 1) * M);
        CHECK(recvs == sends);
      }
}

TEST_CASE("the deadlock check finds receives that can never be satisfied") {
  // Stage 0 waits for gradient 1 before sending activation 1, which stage 1 needs to
  // produce that gradient: a cycle.
  Schedule cycle = gpipe(2, 2, Remat::Never);
  auto& st0 = cycle.actions[0];  // F0 sA0 F1 sA1 rG1 B1 rG0 B0 S
  std::swap(st0[3], st0[4]);
  const std::string why = check(cycle, 2);
  CHECK(why.find("deadlock") == 0);
  CHECK(why.find("stage 0 waits at rG1") != std::string::npos);
  CHECK(why.find("stage 1 waits at rA1") != std::string::npos);

  Schedule lost = gpipe(3, 2, Remat::Never);
  lost.actions[0].erase(lost.actions[0].begin() + 1);  // drop sA0: stage 1 waits forever
  CHECK(check(lost, 2) == "stage 1 waits for rA0 but its link's next is micro-batch 1");

  Schedule stray = gpipe(2, 2, Remat::Never);
  stray.actions[1].insert(stray.actions[1].begin(), Action{Op::RecvGradient, 0});
  CHECK(check(stray, 2) == "the last cell receives a gradient from no one");
}

TEST_CASE("re-materialization recomputes before each backward, except the last micro-batch") {
  const uint32_t M = 4;
  auto recomputes = [](const Schedule& s) {
    std::vector<uint32_t> r;
    for (size_t j = 0; j < s.actions[0].size(); ++j)
      if (s.actions[0][j].op == Op::Recompute) {
        r.push_back(s.actions[0][j].micro_batch);
        // Directly followed by the backward of the same micro-batch.
        CHECK(s.actions[0][j + 1] == Action{Op::Backward, s.actions[0][j].micro_batch});
      }
    return r;
  };
  CHECK(recomputes(gpipe(2, M, Remat::Never)).empty());
  CHECK(recomputes(gpipe(2, M, Remat::Always)) == std::vector<uint32_t>{3, 2, 1, 0});
  CHECK(recomputes(gpipe(2, M, Remat::ExceptLast)) == std::vector<uint32_t>{2, 1, 0});
}

TEST_CASE("remat modes parse and bad ones are refused") {
  CHECK(parse_remat("except-last") == Remat::ExceptLast);
  CHECK_THROWS_WITH_AS(parse_remat("sometimes"), doctest::Contains("`remat`: 'sometimes' is not a mode"), UserError);
  CHECK_THROWS_AS(gpipe(0, 4, Remat::Never), UserError);
}

TEST_CASE("evaluation's schedule runs every forward and nothing else, and passes the check") {
  const pipeline::Schedule s = pipeline::forward_only(pipeline::gpipe(3, 2, pipeline::Remat::Always));
  CHECK_FALSE(s.training);
  CHECK(pipeline::to_string(s) ==
        "stage 0: F0 sA0 F1 sA1\nstage 1: rA0 F0 sA0 rA1 F1 sA1\nstage 2: rA0 F0 rA1 F1\n");
  CHECK(pipeline::check(s, 2).empty());
  pipeline::Schedule training = pipeline::gpipe(3, 2, pipeline::Remat::Never);
  training.training = false;  // a backward in an evaluation schedule is refused
  CHECK_FALSE(pipeline::check(training, 2).empty());
}

namespace {

// Every schedule the builders make, over the shapes the pipeline suite runs and more.
std::vector<Schedule> every_schedule(Remat r) {
  std::vector<Schedule> out;
  for (uint32_t K : {1u, 2u, 3u, 4u, 8u})
    for (uint32_t M : {1u, 2u, 3u, 4u, 5u, 8u, 16u}) {
      for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::ZeroBubble}) out.push_back(build({kind, K, M, 1, r}));
      if (M % K == 0)
        for (uint32_t V : {2u, 3u}) out.push_back(build({ScheduleKind::Interleaved, K, M, V, r}));
    }
  return out;
}

std::string describe(const Schedule& s) {
  return std::string(schedule_kind_name(s.kind)) + " K=" + std::to_string(s.stages) + " V=" +
         std::to_string(s.virtual_stages) + " M=" + std::to_string(s.micro_batches);
}

}  // namespace

TEST_CASE("1f1b prints as warmup, one forward and one backward, then cooldown") {
  CHECK(compute_string(build({ScheduleKind::OneFOneB, 3, 4, 1, Remat::Never})) ==
        "stage 0: F0 F1 F2 B0 F3 B1 B2 B3 S\n"
        "stage 1: F0 F1 B0 F2 B1 F3 B2 B3 S\n"
        "stage 2: F0 B0 F1 B1 F2 B2 F3 B3 S\n");
}

TEST_CASE("zb splits each backward into B and W and holds stage k's W back k micro-batches") {
  CHECK(compute_string(build({ScheduleKind::ZeroBubble, 2, 4, 1, Remat::Never})) ==
        "stage 0: F0 F1 B0 W0 F2 B1 W1 F3 B2 W2 B3 W3 S\n"
        "stage 1: F0 B0 F1 B1 W0 F2 B2 W1 F3 B3 W2 W3 S\n");
}

TEST_CASE("interleaved runs groups of K micro-batches cell by cell") {
  const Schedule s = build({ScheduleKind::Interleaved, 2, 4, 2, Remat::Never});
  CHECK(s.cells() == 4);
  CHECK(compute_string(s) ==
        "stage 0: F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0 S\n"
        "stage 1: F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0 S\n");
  // Cell 1 of stage 1 (the model's last cell, 3) receives from cell 1 of stage 0 (cell 2),
  // which receives from stage 1's cell 0 (cell 1): the boundary that wraps around.
  CHECK(s.cell_of(1, Action{Op::Forward, 0, 1}) == 3);
  CHECK(s.cell_of(0, Action{Op::Forward, 0, 1}) == 2);
}

TEST_CASE("every schedule passes the deadlock check with the executor's two link slots, in every remat mode") {
  for (Remat r : {Remat::Never, Remat::Always, Remat::ExceptLast})
    for (const Schedule& s : every_schedule(r)) {
      INFO(describe(s), " remat=", remat_name(r));
      REQUIRE(check(s, kLinkSlots) == "");
      REQUIRE(check(forward_only(s), kLinkSlots) == "");
    }
}

TEST_CASE("the check finds a send that waits for a link slot the receiver never frees") {
  // Stage 1 waits for A1 before consuming A0: with one slot, A1 is never written.
  Schedule s = gpipe(2, 2, Remat::Never);
  auto& st1 = s.actions[1];  // rA0 F0 rA1 F1 B1 sG1 B0 sG0 S
  std::swap(st1[1], st1[2]);
  CHECK(check(s, 2) == "");
  CHECK(check(s, 1).find("deadlock: stage 0 waits at F1; stage 1 waits at rA1") == 0);
}

TEST_CASE("the check finds broken zero-bubble and interleaved schedules") {
  Schedule w_first = build({ScheduleKind::ZeroBubble, 2, 2, 1, Remat::Never});
  auto& st1 = w_first.actions[1];
  const auto w = std::find(st1.begin(), st1.end(), Action{Op::WeightGradient, 0});
  st1.insert(st1.begin() + 1, *w);  // W0 right after F0, before B0
  st1.erase(std::find(st1.begin() + 2, st1.end(), Action{Op::WeightGradient, 0}));
  CHECK(check(w_first, 2) == "stage 1 runs W0 before its backward");

  Schedule missing_w = build({ScheduleKind::ZeroBubble, 2, 2, 1, Remat::Never});
  std::erase(missing_w.actions[0], Action{Op::WeightGradient, 1});
  CHECK(check(missing_w, 2) == "cell 0 does not run every micro-batch forward and backward and W");

  Schedule unsplit = build({ScheduleKind::OneFOneB, 2, 2, 1, Remat::Never});
  unsplit.actions[0].insert(unsplit.actions[0].end() - 1, Action{Op::WeightGradient, 0});
  CHECK(check(unsplit, 2) == "stage 0 runs W0 in a schedule whose backward is not split");

  // Receiving micro-batch 1 where the link carries 0 first: the executor would read the
  // wrong micro-batch's activation.
  Schedule crossed = build({ScheduleKind::Interleaved, 2, 2, 2, Remat::Never});
  auto& st0 = crossed.actions[0];
  auto r0 = std::find(st0.begin(), st0.end(), Action{Op::RecvActivation, 0, 1});
  auto r1 = std::find(st0.begin(), st0.end(), Action{Op::RecvActivation, 1, 1});
  std::swap(r0->micro_batch, r1->micro_batch);
  CHECK(check(crossed, 2).find("waits for rA1.1 but its link's next is micro-batch 0") != std::string::npos);
}

TEST_CASE("each schedule's activation memory: M sets for gpipe, K - k for 1f1b, at most K for zb") {
  const uint32_t K = 4, M = 8;
  const Slots gp = assign_slots(build({ScheduleKind::GPipe, K, M, 1, Remat::Never}));
  const Slots one = assign_slots(build({ScheduleKind::OneFOneB, K, M, 1, Remat::Never}));
  const Slots zb = assign_slots(build({ScheduleKind::ZeroBubble, K, M, 1, Remat::Never}));
  for (uint32_t k = 0; k < K; ++k) {
    CAPTURE(k);
    CHECK(gp.sets[k] == M);
    CHECK(gp.inputs[k] == M);
    CHECK(one.sets[k] == K - k);
    CHECK(one.inputs[k] == K - k);
    CHECK(zb.sets[k] == K);
    // What B keeps for W lives only until W: stage k holds its W back k micro-batches.
    CHECK(zb.deferreds[k] == k + 1);
    CHECK(one.deferreds[k] == 0);
  }
  // Interleaved: a stage has its warmup of 2(K-k-1) + (V-1)K forwards in flight, and one
  // more; each cell keeps its own most, so together they hold at least that many sets.
  const uint32_t V = 2;
  const Schedule ils = build({ScheduleKind::Interleaved, K, M, V, Remat::Never});
  const Slots il = assign_slots(ils);
  for (uint32_t k = 0; k < K; ++k) {
    uint32_t in_flight = 0, most = 0, held = 0;
    for (const Action& a : ils.actions[k]) {
      if (a.op == Op::Forward) most = std::max(most, ++in_flight);
      if (a.op == Op::Backward) --in_flight;
    }
    for (uint32_t v = 0; v < V; ++v) held += il.sets[v * K + k];
    CHECK(most == std::min(2 * (K - k - 1) + (V - 1) * K + 1, M * V));
    CHECK(held >= most);
  }
  // Re-materialization keeps one set, and every input in flight.
  const Slots gp_remat = assign_slots(build({ScheduleKind::GPipe, K, M, 1, Remat::Always}));
  const Slots one_remat = assign_slots(build({ScheduleKind::OneFOneB, K, M, 1, Remat::ExceptLast}));
  for (uint32_t k = 0; k < K; ++k) {
    CHECK(gp_remat.sets[k] == 1);
    CHECK(gp_remat.inputs[k] == M);
    CHECK(one_remat.sets[k] == 1);
    CHECK(one_remat.inputs[k] == K - k);
  }
  // The last stage under except-last never recomputes in 1f1b: each backward follows its forward.
  const Schedule s = build({ScheduleKind::OneFOneB, K, M, 1, Remat::ExceptLast});
  CHECK(std::none_of(s.actions[K - 1].begin(), s.actions[K - 1].end(), [](auto& a) { return a.op == Op::Recompute; }));
}

TEST_CASE("slots are never shared by two micro-batches alive at once") {
  for (Remat r : {Remat::Never, Remat::Always, Remat::ExceptLast})
    for (const Schedule& s : every_schedule(r)) {
      INFO(describe(s), " remat=", remat_name(r));
      const Slots slots = assign_slots(s);
      for (uint32_t k = 0; k < s.stages; ++k) {
        // Replay: a slot written by one micro-batch must not be read by another's later action.
        std::map<std::pair<uint32_t, uint32_t>, uint32_t> input_owner, set_owner, deferred_owner;  // (cell, slot) -> micro-batch
        const auto& acts = s.actions[k];
        for (size_t x = 0; x < acts.size(); ++x) {
          const Action& a = acts[x];
          if (a.op == Op::Forward) input_owner[{a.cell, slots.input[k][x]}] = a.micro_batch;
          if (a.op == Op::Forward || a.op == Op::Recompute) set_owner[{a.cell, slots.set[k][x]}] = a.micro_batch;
          if (a.op == Op::Recompute || a.op == Op::Backward || a.op == Op::WeightGradient) {
            REQUIRE(input_owner.at({a.cell, slots.input[k][x]}) == a.micro_batch);
            REQUIRE(set_owner.at({a.cell, slots.set[k][x]}) == a.micro_batch);
          }
          if (a.op == Op::Backward && s.split) deferred_owner[{a.cell, slots.deferred[k][x]}] = a.micro_batch;
          if (a.op == Op::WeightGradient) REQUIRE(deferred_owner.at({a.cell, slots.deferred[k][x]}) == a.micro_batch);
        }
      }
    }
}

TEST_CASE("the simulated bubble is GPipe's (K-1)/(M+K-1) for gpipe and 1f1b, smaller for interleaved and zb") {
  for (uint32_t K : {2u, 4u})
    for (uint32_t M : {4u, 8u, 16u}) {
      CAPTURE(K);
      CAPTURE(M);
      const double gpipe_theory = double(K - 1) / (M + K - 1);
      CHECK(simulated_bubble(build({ScheduleKind::GPipe, K, M, 1, Remat::Never})) == doctest::Approx(gpipe_theory));
      CHECK(simulated_bubble(build({ScheduleKind::OneFOneB, K, M, 1, Remat::Never})) == doctest::Approx(gpipe_theory));
      // Megatron-LM: the bubble shrinks by V, (K-1)/(VM+K-1).
      const double il = simulated_bubble(build({ScheduleKind::Interleaved, K, M, 2, Remat::Never}));
      CHECK(il == doctest::Approx(double(K - 1) / (2 * M + K - 1)));
      // ZB-H1 with F = B = W: (K-1) of 3M units idle instead of 3(K-1).
      const double zb = simulated_bubble(build({ScheduleKind::ZeroBubble, K, M, 1, Remat::Never}));
      CHECK(zb == doctest::Approx(double(K - 1) / (3 * M + K - 1)));
    }
}

TEST_CASE("schedules and combinations a schedule cannot run are refused in one line") {
  CHECK(parse_schedule_kind("1f1b") == ScheduleKind::OneFOneB);
  CHECK_THROWS_WITH_AS(parse_schedule_kind("pipedream"), doctest::Contains("expected gpipe, 1f1b, interleaved or zb"), UserError);
  CHECK_THROWS_WITH_AS(build({ScheduleKind::Interleaved, 3, 4, 2, Remat::Never}),
                       "`schedule` interleaved runs micro-batches in groups of the 3 stages, and 4 is not a multiple of 3: use `micro_batches` 3 or 6",
                       UserError);
  CHECK_THROWS_WITH_AS(build({ScheduleKind::Interleaved, 2, 4, 1, Remat::Never}), doctest::Contains("needs `virtual_stages` 2 or more"), UserError);
  CHECK_THROWS_WITH_AS(build({ScheduleKind::ZeroBubble, 2, 4, 2, Remat::Never}), doctest::Contains("`virtual_stages` 2 needs `schedule` interleaved"), UserError);
}

}  // namespace pipeline_schedule_test
