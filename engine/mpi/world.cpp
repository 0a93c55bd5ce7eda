#include "mpi/world.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <cstdlib>

#include "mpi/courier.h"
#include "mpi/mpi_link.h"
#include "vk/check.h"

namespace brigade::mpi {

bool launched() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") || std::getenv("PMI_RANK");
}

namespace {

uint32_t env_number(const char* name, uint32_t fallback) {
  const char* v = std::getenv(name);
  return v ? uint32_t(std::strtoul(v, nullptr, 10)) : fallback;
}

// Waits for a non-blocking collective without spinning: OpenMPI's blocking collectives poll
// the whole time, and a rank that reaches the step first would burn its core (which its
// device may share) until the last one arrives.
void finish(MPI_Request& request) {
  auto nap = std::chrono::microseconds(10);
  for (int done = 0;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(1000));
  }
}

// A communicator's members as a Group: the sum is gathered on the first member, added up
// there in member order and broadcast, so every member gets the same bits (what the stage
// threads of one process get too).
class CommGroup final : public pipeline::Group {
 public:
  explicit CommGroup(MPI_Comm comm) : comm_(comm) {
    int r = 0, n = 0;
    MPI_Comm_rank(comm_, &r);
    MPI_Comm_size(comm_, &n);
    member_ = uint32_t(r), size_ = uint32_t(n);
  }
  ~CommGroup() override { MPI_Comm_free(&comm_); }
  uint32_t size() const override { return size_; }
  bool sum(std::span<double> v) override { return sum_of(v, MPI_DOUBLE); }
  bool sum(std::span<float> v) override { return sum_of(v, MPI_FLOAT); }

 private:
  template <class T>
  bool sum_of(std::span<T> v, MPI_Datatype type) {
    if (size_ == 1) return true;
    const int n = int(v.size());
    std::vector<T> all(member_ == 0 ? v.size() * size_ : 0);
    MPI_Request request;
    MPI_Igather(v.data(), n, type, all.data(), n, type, 0, comm_, &request);
    finish(request);
    if (member_ == 0) {
      std::fill(v.begin(), v.end(), T(0));
      for (uint32_t m = 0; m < size_; ++m)
        for (size_t i = 0; i < v.size(); ++i) v[i] += all[m * v.size() + i];
    }
    MPI_Ibcast(v.data(), n, type, 0, comm_, &request);
    finish(request);
    return true;
  }

  MPI_Comm comm_;
  uint32_t member_ = 0, size_ = 1;
};

}  // namespace

World::World(int* argc, char*** argv) {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  host_ = name;
  if (!launched()) return;
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  initialized_ = true;
  int r = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  rank_ = uint32_t(r), size_ = uint32_t(n);
  local_rank_ = env_number("OMPI_COMM_WORLD_LOCAL_RANK", 0);
  if (provided < MPI_THREAD_MULTIPLE)
    throw UserError("this MPI library does not support MPI_THREAD_MULTIPLE, which brigade's ranks need "
                    "(OpenMPI 4 built with thread support does)");
  MPI_Comm links;
  MPI_Comm_dup(MPI_COMM_WORLD, &links);
  courier_ = std::make_unique<Courier>(links, [this](const std::string& what) {
    std::fprintf(stderr, "brigade: %s: error: %s\n", who().c_str(), what.c_str());
    abort(3);
  });
}

World::~World() {
  courier_.reset();
  if (initialized_) MPI_Finalize();
}

std::string World::who() const {
  return "rank " + std::to_string(rank_) + " of " + std::to_string(size_) + " (" + host_ +
         (role_.empty() ? "" : ", " + role_) + ")";
}

void World::abort(int code) {
  if (initialized_) MPI_Abort(MPI_COMM_WORLD, code);
}

std::string World::broadcast(std::string bytes, uint32_t root) {
  if (!initialized_) return bytes;
  uint64_t n = bytes.size();
  MPI_Bcast(&n, 1, MPI_UINT64_T, int(root), MPI_COMM_WORLD);
  bytes.resize(n);
  MPI_Bcast(bytes.data(), int(n), MPI_BYTE, int(root), MPI_COMM_WORLD);
  return bytes;
}

std::vector<std::string> World::allgather(const std::string& bytes) {
  if (!initialized_) return {bytes};
  const int n = int(bytes.size());
  std::vector<int> sizes(size_), offsets(size_);
  MPI_Allgather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int total = 0;
  for (uint32_t r = 0; r < size_; ++r) offsets[r] = total, total += sizes[r];
  std::string all(size_t(total), '\0');
  MPI_Allgatherv(bytes.data(), n, MPI_BYTE, all.data(), sizes.data(), offsets.data(), MPI_BYTE, MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (uint32_t r = 0; r < size_; ++r) out.push_back(all.substr(size_t(offsets[r]), size_t(sizes[r])));
  return out;
}

World::Placement::~Placement() = default;

std::unique_ptr<World::Placement> World::place(uint32_t stages, uint32_t replicas) {
  BRIGADE_EXPECT(initialized_ && stages * replicas == size_, "a placement covers every rank");
  auto p = std::make_unique<Placement>();
  const uint32_t stage = rank_ % stages, replica = rank_ / stages;
  MPI_Comm pipeline, replica_group;
  MPI_Comm_split(MPI_COMM_WORLD, int(replica), int(stage), &pipeline);
  MPI_Comm_split(MPI_COMM_WORLD, int(stage), int(replica), &replica_group);
  p->groups.push_back(std::make_unique<CommGroup>(pipeline));
  p->groups.push_back(std::make_unique<CommGroup>(replica_group));
  p->ranks.stage = stage, p->ranks.replica = replica, p->ranks.replicas = replicas;
  p->ranks.pipeline = p->groups[0].get();
  p->ranks.replica_group = p->groups[1].get();
  Courier* courier = courier_.get();
  p->ranks.link = [courier, stages, replica](const pipeline::RemoteEnd& end) -> std::unique_ptr<pipeline::Link> {
    // Boundaries of the K x V cells; the tags leave room for all of them.
    const uint32_t boundaries = 64 * stages;
    return std::make_unique<MpiLink>(*courier, end, int(replica * stages + end.peer_stage), boundaries);
  };
  role_ = "stage " + std::to_string(stage) + (replicas > 1 ? " of replica " + std::to_string(replica) : "");
  return p;
}

}  // namespace brigade::mpi
