#include "mpi/courier.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <exception>
#include <optional>

#include "util/error.h"
#include "vk/clock.h"

namespace brigade::mpi {

Courier::Courier(MPI_Comm comm, std::function<void(const std::string&)> fatal)
    : comm_(comm), fatal_(std::move(fatal)), thread_([this] { loop(); }) {}

Courier::~Courier() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Courier::push(Item item) {
  BRIGADE_EXPECT(item.bytes <= uint64_t(INT_MAX), "an MPI message under 2 GiB");
  {
    std::lock_guard lock(mutex_);
    ++unfinished_;
    incoming_.push_back(std::move(item));
  }
  cv_.notify_all();
}

Courier::Urgent::Urgent(Courier& c, vk::Device* device) : c_(c) {
  Waiter w;
  if (device && device->info().type == VK_PHYSICAL_DEVICE_TYPE_CPU) w = {device, device->submitted()};
  {
    std::lock_guard lock(c_.mutex_);
    at_ = c_.waiters_.insert(c_.waiters_.end(), w);
    ++c_.arrivals_;
  }
  c_.cv_.notify_all();
}

Courier::Urgent::~Urgent() {
  std::lock_guard lock(c_.mutex_);
  c_.waiters_.erase(at_);
}

void Courier::drain() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return unfinished_ == 0 || halted_ || failed_; });
}

void Courier::halt() {
  std::unique_lock lock(mutex_);
  halted_ = true;
  cv_.notify_all();
  if (std::this_thread::get_id() != thread_.get_id()) cv_.wait(lock, [&] { return exited_ || failed_; });
}

void Courier::cancel(const void* owner) {
  std::unique_lock lock(mutex_);
  cancelling_.insert(owner);
  cv_.notify_all();
  cv_.wait(lock, [&] { return !cancelling_.count(owner) || stop_ || halted_ || failed_; });
}

void Courier::loop() {
  std::vector<Item> waiting, active;
  std::vector<MPI_Request> requests;
  std::vector<int> indices;
  auto finished = [&](uint64_t n) {
    if (n == 0) return;
    {
      std::lock_guard lock(mutex_);
      unfinished_ -= n;
    }
    cv_.notify_all();
  };
  // The nap while hurrying: a sixteenth of the usual time between two completed messages (a
  // few ms on a CPU device, well under one on a GPU), within 20 us and 2 ms. Calm again, it
  // starts at 1 ms (on two one-core ranks of gpt-mini, 1.5% less time than going on from
  // the hurried nap) and doubles up to 5 ms.
  constexpr std::chrono::microseconds kFirst{10}, kCalm{1000}, kIdle{5000};
  constexpr double kMinUrgentUs = 20, kMaxUrgentUs = 2000;
  double between_us = 16 * kMaxUrgentUs, last_done_us = 0;
  std::chrono::microseconds nap = kFirst;
  uint64_t arrivals = 0;
  bool hurry = false;
  try {
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        // Hurry while a waiting stage's device has nothing left to do; else sleep in the
        // driver until the first busy one has (or the oldest send's data is written).
        std::optional<Waiter> busy;
        const bool was = hurry;
        hurry = false;
        for (const Waiter& w : waiters_)
          if (!w.device || w.device->wait_for(w.value, 0))
            hurry = true;
          else if (!busy)
            busy = w;
        if (hurry && (!was || arrivals_ > arrivals)) nap = kFirst;
        if (!hurry && was) nap = std::max(nap, kCalm);
        arrivals = arrivals_;
        if (incoming_.empty() && !stop_) {
          if (waiting.empty() && requests.empty()) {
            cv_.wait(lock, [&] { return stop_ || halted_ || !incoming_.empty() || !cancelling_.empty(); });
          } else if ((!waiting.empty() && waiting.front().device) || (busy && !hurry)) {
            // Asleep in the driver, at most a nap: until the oldest send's data is written,
            // or until the waiting stage's device has finished its work.
            const Waiter w = !waiting.empty() && waiting.front().device
                                 ? Waiter{waiting.front().device, waiting.front().value}
                                 : *busy;
            lock.unlock();
            w.device->wait_for(w.value, uint64_t(std::chrono::nanoseconds(nap).count()));
            lock.lock();
          } else {
            // Woken early by new work, or by a stage thread starting to wait.
            cv_.wait_for(lock, nap, [&] {
              return stop_ || halted_ || !incoming_.empty() || arrivals_ > arrivals || !cancelling_.empty();
            });
          }
        }
        if (stop_ || halted_) break;
        for (Item& item : incoming_) waiting.push_back(std::move(item));
        incoming_.clear();
        if (!cancelling_.empty()) {
          // A link going away: its receives not matched yet, cancelled (or completed, if a
          // message got there first), and those not started dropped.
          uint64_t dropped = 0;
          for (size_t j = 0; j < waiting.size();)
            if (!waiting[j].send && cancelling_.count(waiting[j].owner))
              waiting.erase(waiting.begin() + ptrdiff_t(j)), ++dropped;
            else
              ++j;
          size_t w = 0;
          for (size_t j = 0; j < requests.size(); ++j) {
            if (!active[j].send && cancelling_.count(active[j].owner)) {
              MPI_Cancel(&requests[j]);
              MPI_Wait(&requests[j], MPI_STATUS_IGNORE);
              continue;
            }
            requests[w] = requests[j], active[w] = std::move(active[j]), ++w;
          }
          requests.resize(w), active.resize(w);
          unfinished_ -= dropped;
          cancelling_.clear();
          cv_.notify_all();
        }
      }
      bool progress = false;
      uint64_t started_receives = 0;
      for (size_t i = 0; i < waiting.size();) {
        Item& item = waiting[i];
        if (item.device && !item.device->wait_for(item.value, 0)) {
          ++i;
          continue;
        }
        MPI_Request r;
        if (item.send)
          MPI_Isend(item.data, int(item.bytes), MPI_BYTE, item.peer, item.tag, comm_, &r);
        else
          MPI_Irecv(item.data, int(item.bytes), MPI_BYTE, item.peer, item.tag, comm_, &r);
        if (item.started) item.started();
        started_receives += !item.send;
        requests.push_back(r);
        active.push_back(std::move(item));
        waiting.erase(waiting.begin() + ptrdiff_t(i));
        progress = true;
      }
      finished(started_receives);
      if (!requests.empty()) {
        int count = 0;
        indices.resize(requests.size());
        MPI_Testsome(int(requests.size()), requests.data(), &count, indices.data(), MPI_STATUSES_IGNORE);
        if (count > 0 && count != MPI_UNDEFINED) {
          progress = true;
          const double now = vk::now_us();
          if (last_done_us > 0) between_us = 0.8 * between_us + 0.2 * (now - last_done_us);
          last_done_us = now;
          uint64_t sends = 0;
          for (int j = 0; j < count; ++j) {
            Item& item = active[size_t(indices[size_t(j)])];
            if (item.done) item.done();
            sends += item.send;
          }
          // Drop the completed ones (their requests are now MPI_REQUEST_NULL).
          size_t w = 0;
          for (size_t j = 0; j < requests.size(); ++j)
            if (requests[j] != MPI_REQUEST_NULL) requests[w] = requests[j], active[w] = std::move(active[j]), ++w;
          requests.resize(w), active.resize(w);
          finished(sends);
        }
      }
      const std::chrono::microseconds urgent_cap{int64_t(std::clamp(between_us / 16, kMinUrgentUs, kMaxUrgentUs))};
      nap = progress && hurry ? kFirst : std::min(nap * 2, hurry ? urgent_cap : kIdle);
    }
  } catch (const std::exception& e) {
    {
      std::lock_guard lock(mutex_);
      failed_ = true;  // no MPI call from here on but the abort that `fatal_` ends in
    }
    cv_.notify_all();
    fatal_(e.what());
  }
  std::unique_lock lock(mutex_);
  if (!halted_ && !failed_) {
    // Receives posted for transfers that will not come: cancelled before MPI finalizes.
    lock.unlock();
    for (size_t j = 0; j < requests.size(); ++j)
      if (!active[j].send) MPI_Cancel(&requests[j]);
    MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
    lock.lock();
  }
  exited_ = true;
  cv_.notify_all();
}

}  // namespace brigade::mpi
