// A communicator's members as a Group (pipeline/group.h): the sum is gathered on the first
// member, added up there in member order and broadcast, so every member gets the same bits
// (what the stage threads of one process get too). Collectives are non-blocking and waited
// for without spinning: OpenMPI's blocking collectives poll the whole time, and a rank that
// reaches the step first would burn its core (which its device may share) until the last
// one arrives.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <limits>

#include "pipeline/group.h"

namespace brigade::mpi {

// Waits for a non-blocking MPI operation, sleeping between tests (10 µs doubling to 1 ms);
// false when `seconds` pass first (the request is then still pending).
bool finish(MPI_Request& request, double seconds = std::numeric_limits<double>::infinity());

class CommGroup final : public pipeline::Group {
 public:
  // Takes ownership of `comm` (freed on destruction).
  explicit CommGroup(MPI_Comm comm);
  ~CommGroup() override;
  CommGroup(const CommGroup&) = delete;
  CommGroup& operator=(const CommGroup&) = delete;

  uint32_t size() const override { return size_; }
  uint32_t member() const { return member_; }
  bool sum(std::span<double> v) override { return sum_of(v, MPI_DOUBLE); }
  bool sum(std::span<float> v) override { return sum_of(v, MPI_FLOAT); }

 private:
  template <class T>
  bool sum_of(std::span<T> v, MPI_Datatype type);

  MPI_Comm comm_;
  uint32_t member_ = 0, size_ = 1;
};

}  // namespace brigade::mpi
