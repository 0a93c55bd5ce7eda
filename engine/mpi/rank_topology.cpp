#include "mpi/rank_topology.h"

#include "mpi/mpi_link.h"

namespace brigade::mpi {

RankTopology::RankTopology(Courier& courier, MPI_Comm world, uint32_t stages, uint32_t replicas)
    : courier_(courier), stages_(stages), replicas_(replicas) {
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  stage_ = uint32_t(rank) % stages, replica_ = uint32_t(rank) / stages;
  MPI_Comm pipeline, replica_group;
  MPI_Comm_split(world, int(replica_), int(stage_), &pipeline);
  MPI_Comm_split(world, int(stage_), int(replica_), &replica_group);
  pipeline_ = std::make_unique<CommGroup>(pipeline);
  replica_group_ = std::make_unique<CommGroup>(replica_group);
}

uint32_t RankTopology::max_boundaries(uint32_t slots) const {
  return max_link_boundaries(courier_.comm(), slots);
}

std::unique_ptr<pipeline::Link> RankTopology::remote_link(const pipeline::RemoteEnd& end) {
  return std::make_unique<MpiLink>(courier_, end, int(replica_ * stages_ + end.peer_stage));
}

}  // namespace brigade::mpi
