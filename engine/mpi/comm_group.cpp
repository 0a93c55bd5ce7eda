#include "mpi/comm_group.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "mpi/chunks.h"

namespace brigade::mpi {

bool finish(MPI_Request& request, double seconds) {
  const auto start = std::chrono::steady_clock::now();
  auto nap = std::chrono::microseconds(10);
  for (int done = 0;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return true;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds) return false;
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(1000));
  }
}

CommGroup::CommGroup(MPI_Comm comm) : comm_(comm) {
  int r = 0, n = 0;
  MPI_Comm_rank(comm_, &r);
  MPI_Comm_size(comm_, &n);
  member_ = uint32_t(r), size_ = uint32_t(n);
}

CommGroup::~CommGroup() { MPI_Comm_free(&comm_); }

template <class T>
bool CommGroup::sum_of(std::span<T> v, MPI_Datatype type) {
  if (size_ == 1) return true;
  // In pieces of at most chunk_elements(sizeof(T)) elements: MPI counts are ints.
  const size_t piece = chunk_elements(sizeof(T));
  for (size_t at = 0; at < v.size(); at += piece) {
    const std::span<T> part = v.subspan(at, std::min(piece, v.size() - at));
    const int n = int(part.size());
    std::vector<T> all(member_ == 0 ? part.size() * size_ : 0);
    MPI_Request request;
    MPI_Igather(part.data(), n, type, all.data(), n, type, 0, comm_, &request);
    finish(request);
    if (member_ == 0) {
      std::fill(part.begin(), part.end(), T(0));
      for (uint32_t m = 0; m < size_; ++m)
        for (size_t i = 0; i < part.size(); ++i) part[i] += all[m * part.size() + i];
    }
    MPI_Ibcast(part.data(), n, type, 0, comm_, &request);
    finish(request);
  }
  return true;
}

template bool CommGroup::sum_of(std::span<double>, MPI_Datatype);
template bool CommGroup::sum_of(std::span<float>, MPI_Datatype);

}  // namespace brigade::mpi
