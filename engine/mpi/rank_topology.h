// The pipeline's Topology when every stage of every replica is a process (a rank of
// MPI_COMM_WORLD, rank = replica * K + stage): this process runs one stage; the pipeline's
// sums run over a communicator of the replica's K ranks, the replicas' over one of the stage's
// R ranks; a boundary to a neighbouring stage is an MpiLink through the world's Courier.
#pragma once

#include <mpi.h>

#include <memory>

#include "mpi/comm_group.h"
#include "mpi/courier.h"
#include "pipeline/topology.h"

namespace brigade::mpi {

class RankTopology final : public pipeline::Topology {
 public:
  // Splits `world` (every rank calls this alike); the courier moves the links' messages
  // between ranks of `world`'s group.
  RankTopology(Courier& courier, MPI_Comm world, uint32_t stages, uint32_t replicas);

  uint32_t stages() const override { return stages_; }
  bool local(uint32_t stage) const override { return stage == stage_; }
  uint32_t replicas() const override { return replicas_; }
  uint32_t replica() const override { return replica_; }
  pipeline::Group& pipeline(uint32_t) override { return *pipeline_; }
  pipeline::Group& processes() override { return *pipeline_; }
  pipeline::Group& replica_group() override { return *replica_group_; }
  uint32_t max_boundaries(uint32_t slots) const override;
  std::unique_ptr<pipeline::Link> remote_link(const pipeline::RemoteEnd& end) override;

 private:
  Courier& courier_;
  uint32_t stages_, replicas_, stage_ = 0, replica_ = 0;
  std::unique_ptr<CommGroup> pipeline_, replica_group_;
};

}  // namespace brigade::mpi
