// A schedule run on paper: each action takes the time its cell's measured (or estimated)
// forward and backward take, each boundary transfer the time its link takes, and stages
// whose devices share one compute resource (CPU drivers in one process share the host's
// cores) run one action at a time between them. What the bubble and the planner's predicted
// step time both come from: nothing about the bubble is assumed, it falls out of the order.
#pragma once

#include <cstdint>
#include <vector>

#include "pipeline/schedule.h"

namespace brigade::pipeline {

struct ActionTimes {
  std::vector<double> forward, backward;  // per cell, one micro-batch (a Recompute is a forward;
                                          // a split backward's B and W take half each)
  // Per boundary b (cell b -> b + 1), one micro-batch's transfer: activations forward,
  // gradients backward. Empty: transfers take no time.
  std::vector<double> activation, gradient;
  // Per stage: the compute resource its device runs on. Empty: every stage its own.
  std::vector<uint32_t> resource;
};

struct Simulation {
  double span = 0;            // first action to last, over all stages
  std::vector<double> busy;   // per stage: time spent computing
  double bubble() const;      // the fraction of stage-time spent idle within the span
};

// Greedy in time: of the stages whose next action may start, the one that can start first
// runs it (ties: the lower stage). A receive waits for the sender's action to finish plus
// the transfer; sends take no stage time (the links overlap them with compute).
Simulation simulate(const Schedule& s, const ActionTimes& t);

}  // namespace brigade::pipeline
