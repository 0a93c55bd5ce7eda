// Where a pipeline's stages run and how they reach each other, as the executor sees it: which
// stages this process runs, the groups the Step sums over, how a boundary crossing into
// another process travels, and which share of every mini-batch this replica takes. The
// executor is written once against it and never asks how many processes there are.
//   - one process running every stage (OneProcess, below): the stage threads are the
//     pipeline's group, there are no replicas and no boundary leaves the process;
//   - ranks (mpi::RankTopology, mpi/rank_topology.h): one stage of one replica per process,
//     its groups MPI communicators, its remote boundaries MPI messages.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/group.h"
#include "pipeline/link.h"

namespace brigade::pipeline {

// The side in this process of a link to a cell in another process.
struct RemoteEnd {
  uint32_t boundary = 0;    // between cells boundary and boundary + 1
  uint32_t boundaries = 0;  // how many the pipeline has
  bool gradient = false;    // backward (from boundary + 1 to boundary) rather than forward
  bool producer = false;    // this process writes it (else reads it)
  uint32_t peer_stage = 0;  // the stage on the other side
  vk::Device* device = nullptr;  // this side's
  uint64_t bytes = 0;
  uint32_t slots = 0;
  std::string name;
};

// This replica's rows of a mini-batch: rows [first, first + rows).
struct Share {
  uint32_t first = 0, rows = 0;
};

class Topology {
 public:
  virtual ~Topology() = default;
  virtual uint32_t stages() const = 0;
  // Whether stage k runs in this process.
  virtual bool local(uint32_t stage) const = 0;
  // Data-parallel copies of the pipeline, and which one this process belongs to.
  virtual uint32_t replicas() const = 0;
  virtual uint32_t replica() const = 0;
  // The sums of the Step over the pipeline's stages, as stage k's thread takes part in them
  // (k local): every stage calls them alike.
  virtual Group& pipeline(uint32_t stage) = 0;
  // The same members, from this process's calling thread once its stage threads are done
  // (evaluation's totals): one process is a group of one.
  virtual Group& processes() = 0;
  // The replicas of this process's stage, in replica order (a group of one without replicas).
  virtual Group& replica_group() = 0;
  // Most boundaries whose transfers, `slots` in flight per link and direction, this topology
  // can tell apart (0: no limit).
  virtual uint32_t max_boundaries(uint32_t slots) const = 0;
  // The side in this process of a boundary whose other side runs elsewhere.
  virtual std::unique_ptr<Link> remote_link(const RemoteEnd& end) = 0;

  // This replica's share of a mini-batch of `rows` (split_rows over the replicas, in order).
  Share share(uint32_t rows) const;
  // The most rows a replica takes of a mini-batch of `rows`: what the plan is laid out for.
  uint32_t largest_share(uint32_t rows) const;
  // The stages this process runs, in order.
  std::vector<uint32_t> local_stages() const;
};

// Every stage in this process, one thread each.
class OneProcess final : public Topology {
 public:
  explicit OneProcess(uint32_t stages);
  uint32_t stages() const override { return uint32_t(threads_.size()); }
  bool local(uint32_t) const override { return true; }
  uint32_t replicas() const override { return 1; }
  uint32_t replica() const override { return 0; }
  Group& pipeline(uint32_t stage) override { return *threads_.at(stage); }
  Group& processes() override { return solo_; }
  Group& replica_group() override { return solo_; }
  uint32_t max_boundaries(uint32_t) const override { return 0; }
  std::unique_ptr<Link> remote_link(const RemoteEnd& end) override;

 private:
  std::vector<std::unique_ptr<ThreadGroup>> threads_;
  SoloGroup solo_;
};

}  // namespace brigade::pipeline
