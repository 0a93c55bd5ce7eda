// The processes of one run. Started by mpirun, each process is a rank of MPI_COMM_WORLD
// (OpenMPI, initialized with MPI_THREAD_MULTIPLE: the stage thread sums while the courier
// thread moves boundary tensors); started alone, it is a world of one and MPI is never
// initialized. Collectives here are for the command line's start and end (agreement
// between ranks, gathering a checkpoint); the training step's sums are Groups (group.h).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/topology.h"

namespace brigade::mpi {

class Courier;

// Whether mpirun (or a compatible launcher) started this process.
bool launched();

class World {
 public:
  // Initializes MPI when launched; refuses a library without MPI_THREAD_MULTIPLE.
  World(int* argc, char*** argv);
  ~World();  // finalizes MPI after a successful run
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  bool multi() const { return size_ > 1; }
  uint32_t rank() const { return rank_; }
  uint32_t size() const { return size_; }
  uint32_t local_rank() const { return local_rank_; }  // among the ranks on this host
  const std::string& host() const { return host_; }
  // "rank 2 of 4 (host, stage 1 of replica 0)": how messages name this process.
  std::string who() const;

  // Stops every rank now, with this exit code (MPI_Abort); returns in a world of one.
  void abort(int code);
  // Called by a rank that fails with `message`: whether every rank fails alike, that is calls
  // this with the same message within `seconds` (a flag, a file or a layout every rank
  // refuses). Then the run can end everywhere with one line and no abort; else (a failure
  // on some ranks only, or different ones) the caller aborts. Always true in a world of one.
  bool alike(const std::string& message, double seconds = 3);

  // Root's bytes, on every rank (in pieces of at most chunk_bytes(), mpi/chunks.h).
  std::string broadcast(std::string bytes, uint32_t root = 0);
  // Every rank's bytes, on every rank, in rank order.
  std::vector<std::string> allgather(const std::string& bytes);

  // This process's place in a pipeline of K stages times R replicas over every rank
  // (rank = replica * K + stage): its stage, its groups and how its links travel. The
  // world must have K * R ranks.
  std::unique_ptr<pipeline::Topology> place(uint32_t stages, uint32_t replicas);

 private:
  uint32_t rank_ = 0, size_ = 1, local_rank_ = 0;
  std::string host_, role_;
  bool initialized_ = false;
  MPI_Comm errors_ = MPI_COMM_NULL;  // alike()'s own communicator: no other call pairs with it
  std::unique_ptr<Courier> courier_;
};

}  // namespace brigade::mpi
