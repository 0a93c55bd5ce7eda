// The members of a collective sum: the stage threads of one process, or the processes of a
// multi-process run (mpi::World). The Step action is written once against it: tied
// gradients, gradient norms, the non-finite check and the loss are sums over the members
// of a pipeline, and data-parallel gradients sums over the replicas of a stage.
#pragma once

#include <barrier>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "pipeline/abort.h"

namespace brigade::pipeline {

class Group {
 public:
  virtual ~Group() = default;
  virtual uint32_t size() const = 0;
  // Every member calls it with a buffer of the same length; each gets the element-wise sum
  // over the members, in member order, the same bits everywhere. False when the run is
  // aborting (the buffer is then unspecified).
  virtual bool sum(std::span<double> values) = 0;
  virtual bool sum(std::span<float> values) = 0;
};

// The K stage threads of one process: one handle per thread, all sharing the barrier that a
// failing thread leaves (arrive_and_drop) so that the others go on and see the abort.
class ThreadGroup final : public Group {
 public:
  struct Shared {
    explicit Shared(uint32_t members) : barrier(members), doubles(members), floats(members) {}
    std::barrier<> barrier;
    std::vector<std::span<double>> doubles;
    std::vector<std::span<float>> floats;
  };
  ThreadGroup(std::shared_ptr<Shared> shared, uint32_t member, const Abort& abort)
      : shared_(std::move(shared)), member_(member), abort_(abort) {}

  uint32_t size() const override { return uint32_t(shared_->doubles.size()); }
  bool sum(std::span<double> values) override { return sum_of(values, shared_->doubles); }
  bool sum(std::span<float> values) override { return sum_of(values, shared_->floats); }

 private:
  template <class T>
  bool sum_of(std::span<T> values, std::vector<std::span<T>>& posted) {
    posted[member_] = values;
    shared_->barrier.arrive_and_wait();
    if (abort_.raised()) return false;
    std::vector<T> total(values.size(), T(0));
    for (const std::span<T>& p : posted)
      for (size_t i = 0; i < total.size(); ++i) total[i] += p[i];
    shared_->barrier.arrive_and_wait();  // everyone has read every buffer
    if (abort_.raised()) return false;
    std::copy(total.begin(), total.end(), values.begin());
    return true;
  }

  std::shared_ptr<Shared> shared_;
  uint32_t member_;
  const Abort& abort_;
};

// A group of one: sums are what they are.
class SoloGroup final : public Group {
 public:
  uint32_t size() const override { return 1; }
  bool sum(std::span<double>) override { return true; }
  bool sum(std::span<float>) override { return true; }
};

}  // namespace brigade::pipeline
