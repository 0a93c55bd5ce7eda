// The one thread of a process that moves boundary tensors between ranks: MPI non-blocking
// sends and receives from and into mapped memory, each started once the device work it
// depends on has completed (the producer's writes, or the last read of a receive slot), and
// completed by MPI_Testsome. Between polls it sleeps, in the driver's wait on the oldest
// send's device work when there is one, and never spins. It hurries (polls at most a
// sixteenth of the usual time between two completed messages apart, within 20 us and 2 ms)
// while a stage thread of this process waits on a transfer with nothing left for its device
// to do; otherwise it backs off to 5 ms. Each wake-up takes the core from a CPU device's own
// threads: two one-core ranks of gpt-mini took 14% longer polling every 200 us than every
// 2 ms, and a stage thread waits for its next transfer while its device still runs the
// previous action, so on a CPU device the courier sleeps in the driver until that work is
// done before it hurries.
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <set>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "vk/device.h"

namespace brigade::mpi {

class Courier {
  // A stage thread waiting on a transfer: urgent once `device` (null: at once) reaches `value`.
  struct Waiter {
    vk::Device* device = nullptr;
    uint64_t value = 0;
  };

 public:
  struct Item {
    bool send = true;
    vk::Device* device = nullptr;  // start once its queue timeline reaches `value` (null: now)
    uint64_t value = 0;
    void* data = nullptr;
    uint64_t bytes = 0;
    int peer = 0, tag = 0;
    std::function<void()> started, done;  // on the courier's thread
    const void* owner = nullptr;  // whose receive it is (cancel())
  };

  // `fatal` reports an error on the courier's thread (a device lost) and stops every rank.
  Courier(MPI_Comm comm, std::function<void(const std::string&)> fatal);
  ~Courier();  // cancels the receives still posted
  Courier(const Courier&) = delete;
  Courier& operator=(const Courier&) = delete;

  void push(Item item);
  // While one is alive, a stage thread waits on a transfer: the courier polls often. A CPU
  // device's thread passes it: the courier then hurries only once that device has finished
  // the work submitted so far (a GPU's work does not share the host's cores).
  class Urgent {
   public:
    explicit Urgent(Courier& c, vk::Device* device = nullptr);
    ~Urgent();
    Urgent(const Urgent&) = delete;
    Urgent& operator=(const Urgent&) = delete;

   private:
    Courier& c_;
    std::list<Waiter>::iterator at_;
  };
  // Blocks until every pushed send has completed and every receive has started.
  void drain();
  // Stops moving messages, for good, and returns once the courier's thread has made its last
  // MPI call: an aborting link frees its mapped memory next, which a send or receive still in
  // flight would otherwise read or write (the job ends anyway: MPI_Abort, or every rank alike).
  // A courier that met an error is past its last call already: halt(), drain() and cancel() do
  // not wait for its `fatal` to return, so the stage thread that met the same loss says its own
  // words first.
  void halt();
  // Cancels the receives `owner` posted that no message has matched, and returns once they
  // are: a link going away leaves none behind for a later pipeline's messages of the same
  // tags to land in. After drain().
  void cancel(const void* owner);
  MPI_Comm comm() const { return comm_; }

 private:
  void loop();

  MPI_Comm comm_;
  std::function<void(const std::string&)> fatal_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Item> incoming_;
  std::set<const void*> cancelling_;  // owners whose receives the loop is to cancel
  bool stop_ = false;
  bool halted_ = false, exited_ = false;  // halt(): no MPI call after; the loop has returned
  bool failed_ = false;                   // the loop met an error: `fatal_` is reporting it
  uint64_t unfinished_ = 0;  // sends not completed, receives not started
  std::list<Waiter> waiters_;  // stage threads waiting on a transfer
  uint64_t arrivals_ = 0;      // waiters ever added: the courier notices a new one
  std::thread thread_;
};

}  // namespace brigade::mpi
