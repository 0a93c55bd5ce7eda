#include "mpi/world.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "mpi/courier.h"
#include "mpi/chunks.h"
#include "mpi/comm_group.h"
#include "mpi/rank_topology.h"
#include "util/error.h"

namespace brigade::mpi {

bool launched() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") || std::getenv("PMI_RANK");
}

namespace {

uint32_t env_number(const char* name, uint32_t fallback) {
  const char* v = std::getenv(name);
  return v ? uint32_t(std::strtoul(v, nullptr, 10)) : fallback;
}

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
  MPI_Comm_dup(MPI_COMM_WORLD, &errors_);
  MPI_Comm links;
  MPI_Comm_dup(MPI_COMM_WORLD, &links);
  courier_ = std::make_unique<Courier>(links, [this](const std::string& what) {
    // A device lost under a send: the stage thread that meets the loss too says more (the
    // step, the checkpoint left) and stops the job itself; the courier stops it when no
    // stage thread has within two seconds.
    std::this_thread::sleep_for(std::chrono::seconds(2));
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

bool World::alike(const std::string& message, double seconds) {
  if (!initialized_) return true;
  uint64_t hash = 14695981039346656037ull;  // FNV-1a of the message
  for (const char c : message) hash = (hash ^ uint8_t(c)) * 1099511628211ull;
  std::vector<uint64_t> all(size_);
  MPI_Request request;
  MPI_Iallgather(&hash, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, errors_, &request);
  // A rank that never calls: the request stays pending, and the caller aborts the job.
  if (!finish(request, seconds)) return false;
  return std::all_of(all.begin(), all.end(), [&](uint64_t h) { return h == hash; });
}

std::string World::broadcast(std::string bytes, uint32_t root) {
  if (!initialized_) return bytes;
  uint64_t n = bytes.size();
  MPI_Bcast(&n, 1, MPI_UINT64_T, int(root), MPI_COMM_WORLD);
  bytes.resize(n);
  for (uint64_t at = 0; at < n; at += chunk_bytes()) {
    const uint64_t piece = std::min(chunk_bytes(), n - at);
    MPI_Bcast(bytes.data() + at, int(piece), MPI_BYTE, int(root), MPI_COMM_WORLD);
  }
  return bytes;
}

std::vector<std::string> World::allgather(const std::string& bytes) {
  if (!initialized_) return {bytes};
  // Each rank's bytes broadcast from it in turn: no count or offset over an int.
  std::vector<std::string> out;
  for (uint32_t r = 0; r < size_; ++r) out.push_back(broadcast(r == rank_ ? bytes : std::string(), r));
  return out;
}

std::unique_ptr<pipeline::Topology> World::place(uint32_t stages, uint32_t replicas) {
  BRIGADE_EXPECT(initialized_ && stages * replicas == size_, "a placement covers every rank");
  const uint32_t stage = rank_ % stages, replica = rank_ / stages;
  role_ = "stage " + std::to_string(stage) + (replicas > 1 ? " of replica " + std::to_string(replica) : "");
  return std::make_unique<RankTopology>(*courier_, MPI_COMM_WORLD, stages, replicas);
}

}  // namespace brigade::mpi
