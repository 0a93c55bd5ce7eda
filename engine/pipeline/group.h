// The members of a collective sum: the stage threads of one process, or the processes of a
// multi-process run (mpi::World). The Step action is written once against it: tied
// gradients, gradient norms, the non-finite check and the loss are sums over the members
// of a pipeline, and data-parallel gradients sums over the replicas of a stage.
#pragma once

#include <atomic>
#include <barrier>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>


namespace brigade::pipeline {

class Group {
 public:
  virtual ~Group() = default;
  virtual uint32_t size() const = 0;
  // Every member calls it with a buffer of the same length; each gets the element-wise sum
  // over the members, in member order, the same bits everywhere. False when a member
  // left (the buffer is then unspecified).
  virtual bool sum(std::span<double> values) = 0;
  virtual bool sum(std::span<float> values) = 0;
  // The calling member takes part in no more sums (its thread failed or stopped early): the
  // others' sums return false rather than wait for it. Processes need not leave: a failing
  // process stops the whole run.
  virtual void leave() {}
};

// The K stage threads of one process: one handle per thread, all sharing the barrier that a
// leaving thread drops out of (arrive_and_drop), so that the others go on and return false.
class ThreadGroup final : public Group {
 public:
  struct Shared {
    explicit Shared(uint32_t members) : barrier(members), doubles(members), floats(members) {}
    std::barrier<> barrier;
    std::atomic<bool> left{false};
    std::vector<std::span<double>> doubles;
    std::vector<std::span<float>> floats;
  };
  ThreadGroup(std::shared_ptr<Shared> shared, uint32_t member) : shared_(std::move(shared)), member_(member) {}

  uint32_t size() const override { return uint32_t(shared_->doubles.size()); }
  bool sum(std::span<double> values) override { return sum_of(values, shared_->doubles); }
  bool sum(std::span<float> values) override { return sum_of(values, shared_->floats); }
  void leave() override {
    shared_->left.store(true, std::memory_order_release);
    shared_->barrier.arrive_and_drop();
  }

 private:
  template <class T>
  bool sum_of(std::span<T> values, std::vector<std::span<T>>& posted) {
    posted[member_] = values;
    shared_->barrier.arrive_and_wait();
    if (left()) return false;  // a member left instead of posting
    std::vector<T> total(values.size(), T(0));
    for (const std::span<T>& p : posted)
      for (size_t i = 0; i < total.size(); ++i) total[i] += p[i];
    // Everyone has read every buffer. No member leaves between the two waits (each is inside
    // this sum), and one may leave as soon as it is past the second: not checked here.
    shared_->barrier.arrive_and_wait();
    std::copy(total.begin(), total.end(), values.begin());
    return true;
  }

  bool left() const { return shared_->left.load(std::memory_order_acquire); }

  std::shared_ptr<Shared> shared_;
  uint32_t member_;
};

// A group of one: sums are what they are.
class SoloGroup final : public Group {
 public:
  uint32_t size() const override { return 1; }
  bool sum(std::span<double>) override { return true; }
  bool sum(std::span<float>) override { return true; }
};

}  // namespace brigade::pipeline
