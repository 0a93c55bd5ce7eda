// Records work for one device's compute queue: dispatches, copies, fills and timestamps.
// Barriers are inserted from the kernels' reflected read/write sets: a dispatch that reads
// what an earlier command wrote, or writes what an earlier command touched, waits for it;
// independent dispatches run without one. Memory shared with another device (Buffer::shared)
// is taken from the queue family it is exchanged with (Buffer::exchange_family) before a
// recording's first use of it and given back when the recording is submitted. Not thread-safe: one Commands per thread.
#pragma once

#include <volk.h>

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "vk/buffer.h"
#include "vk/call.h"
#include "vk/device.h"
#include "vk/kernel.h"

namespace brigade::vk {

// A buffer, or a byte range of one, bound to a kernel.
struct View {
  View(const Buffer& b) : buffer(&b), offset(0), range(b.size()) {}  // NOLINT: implicit on purpose
  View(const Buffer& b, uint64_t off, uint64_t len) : buffer(&b), offset(off), range(len) {}
  const Buffer* buffer;
  uint64_t offset, range;
};

// A view smaller than the tensor a launcher is about to bind would let its kernel run past
// it: a caller bug, reported with the launcher's file:line.
void expect_bytes(const View& v, uint64_t bytes, const std::string& what, const char* file, int line);
#define BRIGADE_EXPECT_BYTES(view, bytes, what) \
  ::brigade::vk::expect_bytes((view), (bytes), (what), __FILE__, __LINE__)
#define BRIGADE_EXPECT_FLOATS(view, floats, what) \
  ::brigade::vk::expect_bytes((view), uint64_t(floats) * 4, (what), __FILE__, __LINE__)

// Workgroups needed to cover `n` items with `per_group` items each.
inline uint32_t groups_for(uint64_t n, uint32_t per_group) {
  return uint32_t((n + per_group - 1) / per_group);
}

// A limit on a dispatch's workgroups along every dimension below the device's, for the tests
// (tests/support/grid_cap.h, which lowers ops::max_groups with it): a launcher that would pass
// a grid's limit only on large tensors is refused on small ones. 0: the device's alone.
std::atomic<uint32_t>& lowered_grid();

class Commands {
 public:
  explicit Commands(Device& device, std::string name = "commands");
  ~Commands();
  Commands(const Commands&) = delete;
  Commands& operator=(const Commands&) = delete;

  void dispatch(const Kernel& kernel, std::initializer_list<View> bindings, const void* push,
                uint32_t push_bytes, Groups groups);
  template <class Push>
  void dispatch(const Kernel& kernel, std::initializer_list<View> bindings, const Push& push,
                Groups groups) {
    static_assert(sizeof(Push) <= kMaxPushBytes, "push constants over 128 bytes");
    dispatch(kernel, bindings, &push, sizeof(Push), groups);
  }
  void copy(const Buffer& src, const Buffer& dst, uint64_t bytes, uint64_t src_offset = 0,
            uint64_t dst_offset = 0);
  void fill(const View& dst, uint32_t word = 0);  // every 32-bit word of the view
  // Orders what follows after everything submitted earlier to this device's queue (the
  // automatic barriers only see this recording).
  void after_earlier_submissions();
  // Writes a GPU timestamp once the preceding commands finish; returns its index.
  uint32_t timestamp();
  // Ends recording and submits; returns the device's queue-timeline value for it.
  uint64_t submit(const std::vector<SemaphoreValue>& waits = {},
                  const std::vector<SemaphoreValue>& signals = {});
  void wait();                 // waits for the last submit
  void run() { submit(), wait(); }
  // After wait(): timestamps in nanoseconds, in the order timestamp() returned them.
  std::vector<double> timestamps_ns() const;
  // Starts a new recording (after wait()), reusing the command buffer.
  void reset();
  // Replay: while on, a recording whose calls are the same as those of the last one submitted
  // (vk::Call: kernels, views, push constants, groups, in order) is not recorded again: the
  // command buffer that one left is submitted as it is. At the first call that differs, or
  // at a submit before all of them, the buffer is recorded anew from the start. Takes effect
  // from the next reset(); off by default. The recording's cost is then the comparison.
  void set_replay(bool on) { keep_ = on; }
  // Submissions since this Commands was made that resubmitted the last recording.
  uint64_t replays() const { return replays_; }

  // Counts since this Commands was made (reset() keeps them).
  uint32_t barriers() const { return barriers_; }
  uint32_t dispatches() const { return dispatches_; }
  // Ownership transfers of shared memory recorded (each take and each giving back).
  uint32_t handoffs() const { return handoffs_; }
  // Profiling: while set, every dispatch is followed by a timestamp, and (kernel, timestamp
  // index) is appended to `marks`; the dispatch's GPU time is that timestamp minus the one
  // before it in the recording.
  struct KernelMark {
    const Kernel* kernel;
    uint32_t timestamp;
    std::string work;  // what the dispatch computes, where its launcher said (note_work)
    double flops = 0;
  };
  void set_kernel_marks(std::vector<KernelMark>* marks) { kernel_marks_ = marks; }
  bool marking() const { return kernel_marks_ != nullptr; }
  // While marking: what the next dispatch computes (a product's shape) and its FLOPs, for its
  // mark.
  void note_work(std::string work, double flops) { work_ = std::move(work), work_flops_ = flops; }
  Device& device() const { return device_; }
  // Device memory the launchers may use for intermediate results of what is recorded while it
  // is set (ops::matmul's split products keep their parts' sums there), no one else's: set by
  // whoever owns what is recorded (a cell), none by default.
  void set_workspace(std::optional<View> w) { workspace_ = w; }
  const std::optional<View>& workspace() const { return workspace_; }

 private:
  enum Access : uint8_t { kRead = 1, kWrite = 2 };
  void begin();
  // The command buffer emptied and begun again; the calls kept are dropped.
  void restart();
  // A call compared with the last recording's next one while replaying, else recorded.
  void issue(const Call& c);
  // Recorded into the command buffer, and kept while replay is on.
  void record(Call c);
  // Replaying: the first call that differs. The buffer is recorded anew with the calls that
  // matched so far.
  void diverge();
  // Takes the shared buffers `c` touches, not yet taken in this recording, from the family
  // each is exchanged with.
  void acquire(const Call& c);
  void record_dispatch(const Call& c);
  void record_timestamp();
  // Registers one command's buffer accesses, with a barrier first if any conflicts with an
  // access since the last barrier: the same bytes of memory (vk::Extent), so a part of an
  // arena conflicts with the arena.
  void touch(const std::vector<std::pair<Extent, uint8_t>>& accesses);
  void barrier();
  VkDescriptorSet descriptor_set(const Kernel& kernel);

  Device& device_;
  std::string name_;
  std::optional<View> workspace_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkQueryPool queries_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> descriptor_pools_;
  size_t pool_cursor_ = 0;  // pools before it are full
  // Descriptor sets by what they bind (see dispatch), kept across recordings: recording a
  // step again then writes no descriptors.
  struct KeyHash {
    size_t operator()(const std::vector<uint64_t>& k) const {
      uint64_t h = 0xcbf29ce484222325ull;
      for (uint64_t v : k) h = (h ^ v) * 0x100000001b3ull;
      return size_t(h);
    }
  };
  std::unordered_map<std::vector<uint64_t>, VkDescriptorSet, KeyHash> sets_;
  static constexpr size_t kMaxCachedSets = 4096;
  // Timestamps written in this recording, and queries reset for them so far: each recording
  // resets the queries it is about to write, in runs that double (2, 2, 4, 8, ...), not the
  // whole pool. The validation layer tracks every reset query of a recording one by one, on
  // record and again on submit: a reset of the whole pool per action made three fashion-mlp
  // pipeline cases allocate 96 million times, not 13 million, and hold a heap of 1.09 GB, not
  // 275 MB (docs/BENCHMARKS.md).
  uint32_t query_count_ = 0, queries_reset_ = 0;
  bool recording_ = false, pending_ = false, any_write_ = false;
  uint64_t submitted_ = 0;
  uint32_t barriers_ = 0, dispatches_ = 0, handoffs_ = 0;
  // Shared buffers taken in this recording, given back at submit, and the family each is
  // exchanged with (Buffer::exchange_family).
  std::vector<std::pair<VkBuffer, uint32_t>> held_;
  std::vector<KernelMark>* kernel_marks_ = nullptr;
  std::string work_;
  double work_flops_ = 0;
  std::vector<std::pair<Extent, uint8_t>> since_barrier_;
  // Replay (set_replay): the calls of the recording the command buffer holds, whether that
  // recording was ended and submitted whole, and, while replaying, the next call to compare
  // and the counts before it began.
  std::vector<Call> calls_;
  bool keep_ = false, complete_ = false, replaying_ = false;
  size_t cursor_ = 0;
  uint32_t dispatches_before_ = 0, barriers_before_ = 0;
  uint64_t replays_ = 0;
};

}  // namespace brigade::vk
