// How often `brigade train` snapshots (tools/brigade/snapshot_policy.h): a fixed interval,
// or as often as costs 2 % of a step, a step's seconds measured so that a slow first step
// (the pipelines compiled) does not make snapshots frequent.
#include <doctest/doctest.h>

#include "snapshot_policy.h"

using brigade::cli::SnapshotPolicy;

TEST_CASE("snapshots cost 2 % of a step, however slow the first step was") {
  // gpt-mini on an H200 with a cold shader cache: a 3 s first step, then 3.4 ms steps; a
  // capture takes 12.5 ms, so one snapshot every 184 steps.
  SnapshotPolicy policy(0);
  policy.captured(0.0125);
  CHECK(policy.due(1, 3.0));  // one step seen: every step until a second is seen
  uint64_t taken = 0, since = 0;
  for (int step = 2; step <= 100; ++step) {
    ++since;
    if (policy.due(since, 0.0034)) ++taken, since = 0;
  }
  CHECK(taken == 0);
  CHECK(policy.interval() == 184);
  // A few slow steps (a shared GPU) leave it too; a lasting change moves it.
  for (int i = 0; i < 5; ++i) policy.due(1, 0.1);
  CHECK(policy.interval() == 184);
  for (int i = 0; i < 10; ++i) policy.due(1, 0.0068);
  CHECK(policy.interval() == 92);
}

TEST_CASE("a snapshot interval given stays as given") {
  SnapshotPolicy policy(3);
  policy.captured(10.0);
  CHECK(!policy.due(2, 0.001));
  CHECK(policy.due(3, 0.001));
  CHECK(policy.interval() == 3);
}
