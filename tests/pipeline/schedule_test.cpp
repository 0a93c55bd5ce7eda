#include <doctest/doctest.h>

#include <algorithm>

#include "pipeline/schedule.h"
#include "vk/check.h"

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
        CHECK(check(s) == "");
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
  const std::string why = check(cycle);
  CHECK(why.find("deadlock") == 0);
  CHECK(why.find("stage 0 waits at rG1") != std::string::npos);
  CHECK(why.find("stage 1 waits at rA1") != std::string::npos);

  Schedule lost = gpipe(3, 2, Remat::Never);
  lost.actions[0].erase(lost.actions[0].begin() + 1);  // drop sA0: stage 1 waits forever
  CHECK(check(lost).find("stage 1 waits at rA0") != std::string::npos);

  Schedule stray = gpipe(2, 2, Remat::Never);
  stray.actions[1].insert(stray.actions[1].begin(), Action{Op::RecvGradient, 0});
  CHECK(check(stray) == "the last stage receives a gradient from no one");
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
  CHECK_THROWS_WITH_AS(parse_remat("sometimes"), doctest::Contains("--remat: 'sometimes' is not a mode"), UserError);
  CHECK_THROWS_AS(gpipe(0, 4, Remat::Never), UserError);
}

TEST_CASE("evaluation's schedule runs every forward and nothing else, and passes the check") {
  const pipeline::Schedule s = pipeline::forward_only(3, 2);
  CHECK_FALSE(s.training);
  CHECK(pipeline::to_string(s) ==
        "stage 0: F0 sA0 F1 sA1\nstage 1: rA0 F0 sA0 rA1 F1 sA1\nstage 2: rA0 F0 rA1 F1\n");
  CHECK(pipeline::check(s).empty());
  pipeline::Schedule training = pipeline::gpipe(3, 2, pipeline::Remat::Never);
  training.training = false;  // a backward in an evaluation schedule is refused
  CHECK_FALSE(pipeline::check(training).empty());
}
