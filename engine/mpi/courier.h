// The one thread of a process that moves boundary tensors between ranks: MPI non-blocking
// sends and receives from and into mapped memory, each started once the device work it
// depends on has completed (the producer's writes, or the last read of a receive slot), and
// completed by MPI_Testsome. Between polls it sleeps, in the driver's wait on the oldest
// send's device work when there is one, and never spins. While a stage thread of this
// process waits on a transfer it polls at most a sixteenth of the usual time between two
// completed messages apart (within 20 µs and 2 ms), and while none does, backing off to 5 ms:
// each wake-up takes the core from the device's own threads (a CPU device shares it), and
// two one-core ranks of gpt-mini took 14% longer polling every 200 µs than every 2 ms.
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "vk/device.h"

namespace brigade::mpi {

class Courier {
 public:
  struct Item {
    bool send = true;
    vk::Device* device = nullptr;  // start once its queue timeline reaches `value` (null: now)
    uint64_t value = 0;
    void* data = nullptr;
    uint64_t bytes = 0;
    int peer = 0, tag = 0;
    std::function<void()> started, done;  // on the courier's thread
  };

  // `fatal` reports an error on the courier's thread (a device lost) and stops every rank.
  Courier(MPI_Comm comm, std::function<void(const std::string&)> fatal);
  ~Courier();  // cancels the receives still posted
  Courier(const Courier&) = delete;
  Courier& operator=(const Courier&) = delete;

  void push(Item item);
  // While one is alive, a stage thread waits on a transfer: the courier polls often.
  class Urgent {
   public:
    explicit Urgent(Courier& c);
    ~Urgent();
   private:
    Courier& c_;
  };
  // Blocks until every pushed send has completed and every receive has started.
  void drain();
  MPI_Comm comm() const { return comm_; }

 private:
  void loop();

  MPI_Comm comm_;
  std::function<void(const std::string&)> fatal_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Item> incoming_;
  bool stop_ = false;
  uint64_t unfinished_ = 0;  // sends not completed, receives not started
  int urgent_ = 0;           // stage threads waiting on a transfer
  std::thread thread_;
};

}  // namespace brigade::mpi
