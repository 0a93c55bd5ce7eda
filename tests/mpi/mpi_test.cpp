// engine/mpi below the program: CommGroup's ordered sums, the World's collectives in chunks,
// the Courier, and MpiLink's slots and tags, between the ranks of `mpirun -np 2 test_mpi`
// (tests/CMakeLists.txt). Every rank runs every case in the same order; a case's collectives
// pair up across ranks.
#include <doctest/doctest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <cstring>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gpu.h"
#include "mpi/chunks.h"
#include "mpi/comm_group.h"
#include "mpi/courier.h"
#include "mpi/mpi_link.h"
#include "mpi/world.h"
#include "ops/matmul.h"

using namespace brigade;

namespace {

// MPI for the whole program: initialized on first use, finalized at exit.
mpi::World& world() {
  static mpi::World w(nullptr, nullptr);
  return w;
}

MPI_Comm dup_world() {
  world();
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  return c;
}

// Restores the default chunk size when a case ends, however it ends.
struct Chunked {
  explicit Chunked(uint64_t bytes) { mpi::set_chunk_bytes(bytes); }
  ~Chunked() { mpi::set_chunk_bytes(uint64_t(1) << 30); }
};

}  // namespace

TEST_CASE("the test runs as two ranks") {
  REQUIRE(mpi::launched());
  REQUIRE(world().size() == 2);
}

TEST_CASE("a CommGroup sums in member order, the same bits on every member, in chunks or whole") {
  mpi::CommGroup group(dup_world());
  REQUIRE(group.size() == 2);
  const uint32_t me = group.member();
  // Values whose float sum rounds (1e8 + 1 - 1e8): the expected bits are the member-order sum
  // from zero, (0 + member 0) + member 1, what the stage threads of one process compute.
  std::vector<float> mine(37);
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = me == 0 ? 1e8f + float(i) : 1.0f - 1e8f + float(i) * 0.5f;
  std::vector<float> want(mine.size());
  for (size_t i = 0; i < mine.size(); ++i) want[i] = (0.0f + (1e8f + float(i))) + (1.0f - 1e8f + float(i) * 0.5f);
  std::vector<float> whole = mine;
  REQUIRE(group.sum(whole));
  CHECK(std::memcmp(whole.data(), want.data(), want.size() * sizeof(float)) == 0);
  {
    Chunked small(12);  // three floats per call: 37 floats take 13 calls, the last of one
    std::vector<float> chunked = mine;
    REQUIRE(group.sum(chunked));
    CHECK(std::memcmp(chunked.data(), want.data(), want.size() * sizeof(float)) == 0);
  }
  std::vector<double> d{double(me) + 0.25, -1.0};
  REQUIRE(group.sum(d));
  CHECK(d == std::vector<double>{1.5, -2.0});
  // Every member holds the same bits: gather member 1's result on member 0 through a sum of
  // the difference.
  std::vector<float> diff(whole.size());
  for (size_t i = 0; i < diff.size(); ++i) diff[i] = me == 0 ? whole[i] : -whole[i];
  REQUIRE(group.sum(diff));
  for (float x : diff) CHECK(x == 0.0f);
}

TEST_CASE("the World's broadcast and allgather carry more bytes than one chunk, and none") {
  mpi::World& w = world();
  Chunked small(7);
  std::string text(100, '\0');
  for (size_t i = 0; i < text.size(); ++i) text[i] = char('a' + (i * 7 + w.rank()) % 26);
  const std::string from_root = w.broadcast(w.rank() == 0 ? text : std::string("ignored"), 0);
  std::string root_text = text;
  for (size_t i = 0; i < root_text.size(); ++i) root_text[i] = char('a' + (i * 7) % 26);
  CHECK(from_root == root_text);
  CHECK(w.broadcast(std::string(), 1).empty());
  // Rank r gives 3r + 20 bytes (crossing 7-byte chunks unevenly).
  const std::string mine(3 * w.rank() + 20, char('0' + w.rank()));
  const std::vector<std::string> all = w.allgather(mine);
  REQUIRE(all.size() == 2);
  CHECK(all[0] == std::string(20, '0'));
  CHECK(all[1] == std::string(23, '1'));
}

TEST_CASE("the Courier delivers messages by tag whatever order they are sent in") {
  MPI_Comm comm = dup_world();
  const int me = int(world().rank()), peer = 1 - me;
  {
    mpi::Courier courier(comm, [](const std::string& what) { FAIL(what); });
    std::vector<std::vector<int>> out(3), in(3, std::vector<int>(4, -1));
    std::atomic<int> received{0};
    // Rank 0 receives tags 0, 1, 2 while rank 1 sends them 2, 0, 1; then the other way round.
    for (int round = 0; round < 2; ++round) {
      const bool sends = (me == 1) == (round == 0);
      received = 0;
      for (int t : {2, 0, 1}) {
        if (sends) {
          out[t].assign(4, 100 * round + t);
          courier.push({true, nullptr, 0, out[t].data(), 4 * sizeof(int), peer, t, nullptr, nullptr});
        } else {
          in[t].assign(4, -1);
        }
      }
      if (!sends)
        for (int t = 0; t < 3; ++t)
          courier.push({false, nullptr, 0, in[t].data(), 4 * sizeof(int), peer, t, nullptr, [&] { ++received; }});
      courier.drain();
      if (!sends) {
        while (received.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        for (int t = 0; t < 3; ++t) CHECK(in[t] == std::vector<int>(4, 100 * round + t));
      }
      MPI_Barrier(comm);
    }
  }
  MPI_Comm_free(&comm);
}

TEST_CASE("a Courier that met an error lets halt() return while its fatal report is still under way") {
  // The stage thread that meets a lost device halts the courier as it unwinds, and says where
  // the job stopped once halt() returns. A courier that met the loss too reports it after a
  // grace period and aborts: halt() waiting for that report would silence the stage thread.
  MPI_Comm comm = dup_world();
  const int me = int(world().rank());
  {
    std::mutex m;
    std::condition_variable cv;
    bool reported = false, released = false;
    std::string what;
    mpi::Courier courier(comm, [&](const std::string& w) {
      std::unique_lock lock(m);
      what = w, reported = true;
      cv.notify_all();
      cv.wait(lock, [&] { return released; });  // the grace period, till the test ends it
    });
    int out = 42, in = 0;
    // A send to this rank itself, whose start fails on the courier's thread.
    courier.push({true, nullptr, 0, &out, sizeof out, me, 9, [] { throw std::runtime_error("the device was lost"); },
                  nullptr});
    {
      std::unique_lock lock(m);
      REQUIRE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return reported; }));
    }
    CHECK(what == "the device was lost");
    // A send still unfinished: drain() and cancel() return all the same.
    auto halted = std::async(std::launch::async, [&] {
      courier.drain();
      courier.cancel(&courier);
      courier.halt();
    });
    const bool returned = halted.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
    {
      std::lock_guard lock(m);
      released = true;
    }
    cv.notify_all();
    CHECK_MESSAGE(returned, "drain(), cancel() or halt() waited for the courier's fatal report to return");
    if (!returned) courier.halt();  // frees a drain() or cancel() still waiting, so the case ends
    halted.wait();
    MPI_Recv(&in, 1, MPI_INT, me, 9, comm, MPI_STATUS_IGNORE);  // the send it had posted, matched
    CHECK(in == 42);
  }
  MPI_Comm_free(&comm);
}

TEST_CASE_FIXTURE(test::Gpu, "an MpiLink carries transfers through its slots in order and reuses them") {
  MPI_Comm comm = dup_world();
  const uint32_t me = world().rank();
  constexpr uint32_t kSlots = 2, kTransfers = 9, kFloats = 300;
  {
    mpi::Courier courier(comm, [](const std::string& what) { FAIL(what); });
    vk::Device& dev = device(0);
    // Rank 0 runs cell 0 and sends activations over boundary 0 of a 3-boundary pipeline.
    pipeline::RemoteEnd end{0, 3, false, me == 0, 1 - me, &dev, kFloats * 4, kSlots, "link 0->1 activations"};
    mpi::MpiLink link(courier, end, int(1 - me));
    CHECK(link.slots() == kSlots);
    const pipeline::StopFn never = [] { return false; };
    for (uint64_t n = 0; n < kTransfers; ++n) {
      if (me == 0) {
        REQUIRE(link.wait_free(n, never));  // transfer n - 2 has left slot n % 2
        float* p = static_cast<float*>(link.send(n).mapped());
        for (uint32_t i = 0; i < kFloats; ++i) p[i] = float(n * 1000 + i);
        link.post(n, dev, 0, "sA" + std::to_string(n));
      } else {
        REQUIRE(link.wait_arrived(n, never));
        const float* p = static_cast<const float*>(link.receive(n).mapped());
        uint32_t wrong = 0;
        for (uint32_t i = 0; i < kFloats; ++i) wrong += p[i] != float(n * 1000 + i);
        CHECK_MESSAGE(wrong == 0, "transfer ", n);
        link.release(n, dev, 0);
      }
    }
    link.drain();
    const std::vector<pipeline::Transfer> t = link.take_transfers();
    CHECK(t.size() == (me == 0 ? kTransfers : 0u));  // the producer's side traces its sends
    MPI_Barrier(comm);
  }
  MPI_Comm_free(&comm);
}

TEST_CASE_FIXTURE(test::Gpu, "a transfer arrives while the waiting stage's device is still busy") {
  // On a CPU device the courier hurries only once the waiting stage's device has finished
  // its work; until then its calm naps must still complete the transfer (a courier that
  // waited for the device would deliver it only after the work below).
  MPI_Comm comm = dup_world();
  const uint32_t me = world().rank();
  constexpr uint32_t kFloats = 64;
  {
    mpi::Courier courier(comm, [](const std::string& what) { FAIL(what); });
    vk::Device& dev = device(0);
    pipeline::RemoteEnd end{0, 1, false, me == 0, 1 - me, &dev, kFloats * 4, 2, "link 0->1 activations"};
    mpi::MpiLink link(courier, end, int(1 - me));
    if (me == 0) {
      MPI_Barrier(comm);  // the other rank's device is busy; it is about to wait
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      REQUIRE(link.wait_free(0, [] { return false; }));
      float* p = static_cast<float*>(link.send(0).mapped());
      for (uint32_t i = 0; i < kFloats; ++i) p[i] = float(7 * i);
      link.post(0, dev, 0, "sA0");
    } else {
      // Products queued first: the device is busy for a good part of a second.
      constexpr uint32_t kN = 512;
      vk::Buffer a(dev, kN * kN * 4, vk::Category::Scratch, "a"), c(dev, kN * kN * 4, vk::Category::Scratch, "c");
      vk::Commands work(dev, "products");
      work.fill(vk::View(a), 0);
      for (int r = 0; r < 48; ++r)
        ops::matmul(work, vk::View(a), vk::View(a), vk::View(c), ops::MatmulParams{.M = kN, .N = kN, .K = kN});
      const uint64_t busy = work.submit();
      MPI_Barrier(comm);
      const auto start = std::chrono::steady_clock::now();
      const pipeline::StopFn give_up = [&] { return std::chrono::steady_clock::now() - start > std::chrono::seconds(30); };
      CHECK(link.wait_arrived(0, give_up));
      CHECK_FALSE(dev.wait_for(busy, 0));  // it arrived while the device was still busy
      const float* p = static_cast<const float*>(link.receive(0).mapped());
      uint32_t wrong = 0;
      for (uint32_t i = 0; i < kFloats; ++i) wrong += p[i] != float(7 * i);
      CHECK(wrong == 0);
      dev.wait(busy);
      link.release(0, dev, busy);
    }
    link.drain();
    MPI_Barrier(comm);
  }
  MPI_Comm_free(&comm);
}

TEST_CASE("the tag budget: boundaries x directions x a window wider than the slots in flight") {
  MPI_Comm comm = dup_world();
  void* ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(comm, MPI_TAG_UB, &ub, &flag);
  REQUIRE(flag);
  const int tag_ub = *static_cast<int*>(ub);
  for (uint32_t slots : {1u, 2u, 8u}) {
    const uint32_t most = mpi::max_link_boundaries(comm, slots);
    CHECK(most == uint32_t(tag_ub / (2 * (4 * int64_t(slots) + 1))));
    // At the budget a link's window still holds more than 4 x slots transfer numbers.
    CHECK(tag_ub / int64_t(2 * most) > 4 * int64_t(slots));
  }
  MPI_Comm_free(&comm);
}
