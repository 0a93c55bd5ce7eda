#include "vk/commands.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "util/sanitizers.h"
#include "util/units.h"
#include "vk/check.h"
#include "vk/clock.h"

namespace brigade::vk {

constexpr uint32_t kMaxQueries = 4096;

std::atomic<uint32_t>& lowered_grid() {
  static std::atomic<uint32_t> groups{0};
  return groups;
}

void expect_bytes(const View& v, uint64_t bytes, const std::string& what, const char* file, int line) {
  if (v.range < bytes)
    fail_invariant(file, line, what + " '" + v.buffer->name() + "' view holds " +
                                   std::to_string(v.range) + " bytes, the shape needs " +
                                   std::to_string(bytes));
}

Commands::Commands(Device& device, std::string name) : device_(device), name_(std::move(name)) {
  const auto& vk = device.vk();
  VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = device.compute_family();
  VK_CHECK(vk.vkCreateCommandPool(device.handle(), &pool, nullptr, &pool_));
  VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  alloc.commandPool = pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  {  // Debian 12's validation layer (1.3.239) never frees its state of a command buffer under
     // synchronization validation (a shared_ptr to itself: Vulkan-ValidationLayers issue 6033).
    const LeaksNotReported leaks;
    VK_CHECK(vk.vkAllocateCommandBuffers(device.handle(), &alloc, &cmd_));
  }
  device.name(VK_OBJECT_TYPE_COMMAND_POOL, pool_, name_ + " pool");
  device.name(VK_OBJECT_TYPE_COMMAND_BUFFER, cmd_, name_);
  begin();
}

Commands::~Commands() {
  const auto& vk = device_.vk();
  if (pending_) {
    try {
      device_.wait(submitted_);
    } catch (const VulkanError&) {
      // The device is lost: nothing will run any more, and the failure that ended the work
      // has already been thrown where it happened. A destructor must not throw.
    }
  }
  // A recording left open (a stage that stopped part-way) is not ended: buffers it binds may
  // already be gone, and destroying the pool frees the command buffer in any state.
  if (queries_) vk.vkDestroyQueryPool(device_.handle(), queries_, nullptr);
  for (auto p : descriptor_pools_) vk.vkDestroyDescriptorPool(device_.handle(), p, nullptr);
  vk.vkDestroyCommandPool(device_.handle(), pool_, nullptr);
}

void Commands::begin() {
  VkCommandBufferBeginInfo info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  // A buffer kept for replay is submitted again, so not once only.
  info.flags = keep_ ? 0 : VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VK_CHECK(device_.vk().vkBeginCommandBuffer(cmd_, &info));
  recording_ = true;
  any_write_ = false;
  query_count_ = queries_reset_ = 0;
  since_barrier_.clear();
  held_.clear();
}

void Commands::restart() {
  VK_CHECK(device_.vk().vkResetCommandBuffer(cmd_, 0));
  // The sets stay cached across recordings (the same step binds the same views every time);
  // past a bound they are all dropped, which is safe here: nothing recorded is pending, and
  // the one recording that bound them is gone.
  if (sets_.size() > kMaxCachedSets) {
    for (auto p : descriptor_pools_) VK_CHECK(device_.vk().vkResetDescriptorPool(device_.handle(), p, 0));
    pool_cursor_ = 0;
    sets_.clear();
  }
  calls_.clear();
  complete_ = replaying_ = false;
  begin();
}

void Commands::reset() {
  if (pending_) wait();
  if (keep_ && complete_ && !recording_) {
    // The buffer holds the last recording, ended: compare the calls to come with it.
    replaying_ = true;
    cursor_ = 0;
    query_count_ = 0;
    dispatches_before_ = dispatches_, barriers_before_ = barriers_;
    return;
  }
  if (recording_) {
    device_.vk().vkEndCommandBuffer(cmd_);
    recording_ = false;
  }
  restart();
}

void Commands::issue(const Call& c) {
  if (replaying_) {
    if (cursor_ < calls_.size() && calls_[cursor_].same(c)) {
      Call& kept = calls_[cursor_++];
      for (uint32_t i = 0; i < c.views; ++i) kept.view[i].buffer = c.view[i].buffer;  // as passed now, should the rest differ
      barriers_ += kept.barriers;
      if (c.kind == Call::Kind::Dispatch) ++dispatches_;
      if (c.kind == Call::Kind::Timestamp) ++query_count_;
      return;
    }
    diverge();
  }
  record(c);
}

void Commands::diverge() {
  std::vector<Call> matched;
  matched.swap(calls_);
  matched.resize(cursor_);
  dispatches_ = dispatches_before_, barriers_ = barriers_before_;
  restart();
  for (const Call& c : matched) record(c);
}

void Commands::record(Call c) {
  const uint32_t before = barriers_;
  acquire(c);
  switch (c.kind) {
    case Call::Kind::Dispatch: record_dispatch(c); break;
    case Call::Kind::Copy: {
      touch({{c.view[0].buffer->extent(), kRead}, {c.view[1].buffer->extent(), kWrite}});
      VkBufferCopy region{c.view[0].offset, c.view[1].offset, c.bytes};
      device_.vk().vkCmdCopyBuffer(cmd_, c.view[0].buffer->handle(), c.view[1].buffer->handle(), 1, &region);
      break;
    }
    case Call::Kind::Fill:
      touch({{c.view[0].buffer->extent(), kWrite}});
      device_.vk().vkCmdFillBuffer(cmd_, c.view[0].buffer->handle(), c.view[0].offset, c.view[0].range / 4 * 4, c.word);
      break;
    case Call::Kind::Timestamp: record_timestamp(); break;
    case Call::Kind::Barrier: barrier(); break;
  }
  if (!keep_) return;
  c.barriers = barriers_ - before;
  calls_.push_back(c);
}

void Commands::after_earlier_submissions() { issue(Call{}); }

namespace {
VkBufferMemoryBarrier handoff(VkBuffer buffer, uint32_t from, uint32_t to) {
  VkBufferMemoryBarrier b{VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER};
  b.srcQueueFamilyIndex = from, b.dstQueueFamilyIndex = to;
  b.buffer = buffer, b.offset = 0, b.size = VK_WHOLE_SIZE;
  return b;
}
}  // namespace

void Commands::acquire(const Call& c) {
  // Memory another device shares is exclusive to no queue of this one between recordings:
  // its contents are defined here only once taken from the family it is exchanged with
  // (VK_QUEUE_FAMILY_EXTERNAL, or FOREIGN_EXT across drivers), before the recording's first
  // use (and given back at submit). The source stages order the taking after this queue's
  // earlier work.
  std::vector<VkBufferMemoryBarrier> take;
  for (uint32_t i = 0; i < c.views; ++i) {
    const Buffer& b = c.view[i].buffer->whole();
    const std::pair<VkBuffer, uint32_t> held{b.handle(), b.exchange_family()};
    if (!b.shared() || std::find(held_.begin(), held_.end(), held) != held_.end()) continue;
    held_.push_back(held);
    take.push_back(handoff(held.first, held.second, device_.compute_family()));
    take.back().dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  }
  if (take.empty()) return;
  const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  device_.vk().vkCmdPipelineBarrier(cmd_, stages, stages, 0, 0, nullptr, uint32_t(take.size()), take.data(), 0, nullptr);
  handoffs_ += uint32_t(take.size());
}

void Commands::barrier() {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                     VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags stages =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  device_.vk().vkCmdPipelineBarrier(cmd_, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
  since_barrier_.clear();
  ++barriers_;
}

void Commands::touch(const std::vector<std::pair<Extent, uint8_t>>& accesses) {
  // The barrier is decided for the whole command first: one taken halfway through would
  // forget the accesses registered before it. A handful of buffers is touched between two
  // barriers, so a list serves.
  bool conflict = false;
  for (const auto& [extent, access] : accesses)
    for (const auto& [seen, was] : since_barrier_)
      if (seen.overlaps(extent) && ((was & kWrite) || (access & kWrite))) conflict = true;
  if (conflict) barrier();
  for (const auto& [extent, access] : accesses) {
    since_barrier_.emplace_back(extent, access);
    if (access & kWrite) any_write_ = true;
  }
}

VkDescriptorSet Commands::descriptor_set(const Kernel& kernel) {
  // Sets come from pools owned by this Commands, released together when reset() drops the
  // cache. Plain descriptor sets rather than push descriptors: synchronization validation
  // tracks them.
  constexpr uint32_t kSetsPerPool = 256, kBuffersPerSet = 8;
  const auto& vk = device_.vk();
  VkDescriptorSetLayout layout = kernel.set_layout();
  VkDescriptorSetAllocateInfo info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  info.descriptorSetCount = 1;
  info.pSetLayouts = &layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  for (; pool_cursor_ < descriptor_pools_.size(); ++pool_cursor_) {
    info.descriptorPool = descriptor_pools_[pool_cursor_];
    const VkResult r = vk.vkAllocateDescriptorSets(device_.handle(), &info, &set);
    if (r == VK_SUCCESS) return set;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) VK_CHECK(r);
  }
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * kBuffersPerSet};
  VkDescriptorPoolCreateInfo pool{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pool.maxSets = kSetsPerPool;
  pool.poolSizeCount = 1;
  pool.pPoolSizes = &size;
  VkDescriptorPool p = VK_NULL_HANDLE;
  VK_CHECK(vk.vkCreateDescriptorPool(device_.handle(), &pool, nullptr, &p));
  device_.name(VK_OBJECT_TYPE_DESCRIPTOR_POOL, p, name_ + " descriptors");
  descriptor_pools_.push_back(p);
  info.descriptorPool = p;
  VK_CHECK(vk.vkAllocateDescriptorSets(device_.handle(), &info, &set));
  return set;
}

void Commands::dispatch(const Kernel& kernel, std::initializer_list<View> bindings,
                        const void* push, uint32_t push_bytes, Groups groups) {
  if (bindings.size() != kernel.bindings())
    throw VulkanError(kernel.name() + ": bound " + std::to_string(bindings.size()) +
                          " buffers, the shader declares " + std::to_string(kernel.bindings()),
                      VK_ERROR_UNKNOWN);
  if (bindings.size() > Call::kMaxViews)
    throw VulkanError(kernel.name() + ": binds " + std::to_string(bindings.size()) + " buffers, more than " +
                          std::to_string(Call::kMaxViews) + " a recorded call keeps",
                      VK_ERROR_UNKNOWN);
  // A launcher that asks for more workgroups than the device dispatches is a bug: refused here
  // rather than left to whatever the driver does with it (some run part of the grid).
  std::array<uint32_t, 3> most = device_.info().max_workgroup_count;
  const uint32_t lowered = lowered_grid().load(std::memory_order_relaxed);
  for (uint32_t& m : most) m = lowered ? std::min(m, lowered) : m;
  if (groups.x > most[0] || groups.y > most[1] || groups.z > most[2])
    throw VulkanError(device_.label() + ": " + kernel.name() + ": " + std::to_string(groups.x) + "x" +
                          std::to_string(groups.y) + "x" + std::to_string(groups.z) +
                          " workgroups, over this device's maxComputeWorkGroupCount of " + std::to_string(most[0]) +
                          "x" + std::to_string(most[1]) + "x" + std::to_string(most[2]) +
                          (lowered ? " (lowered by the tests)" : ""),
                      VK_ERROR_UNKNOWN);
  const uint64_t max_range = device_.info().max_storage_buffer_range;
  Call c;
  c.kind = Call::Kind::Dispatch;
  c.kernel = &kernel, c.groups = groups, c.push_bytes = push_bytes;
  if (push_bytes) std::memcpy(c.push.data(), push, push_bytes);
  uint32_t b = 0;
  for (const View& v : bindings) {
    if (v.range > max_range)
      throw UserError(device_.label() + ": tensor '" + v.buffer->name() + "' is " +
                      format_bytes(v.range) + ", over this device's maxStorageBufferRange of " +
                      format_bytes(max_range) + "; a kernel cannot bind it whole (use more "
                      "micro-batches or stages so tensors are smaller)");
    if (v.offset % std::max<uint64_t>(device_.info().min_storage_offset_alignment, 1))
      throw VulkanError(device_.label() + ": " + kernel.name() + " binding " + std::to_string(b) +
                            ": view of '" + v.buffer->name() + "' at offset " + std::to_string(v.offset) +
                            ", not a multiple of this device's minStorageBufferOffsetAlignment " +
                            std::to_string(device_.info().min_storage_offset_alignment),
                        VK_ERROR_UNKNOWN);
    c.add(*v.buffer, v.offset, v.range);
    ++b;
  }
  issue(c);
  if (kernel_marks_) {
    kernel_marks_->push_back({&kernel, timestamp(), std::move(work_), work_flops_});
    work_.clear(), work_flops_ = 0;
  }
}

void Commands::record_dispatch(const Call& c) {
  const Kernel& kernel = *c.kernel;
  std::vector<VkDescriptorBufferInfo> infos;
  infos.reserve(c.views);
  std::vector<std::pair<Extent, uint8_t>> accesses;
  // The cache key: the set layout and every binding's buffer (by serial), offset and range.
  std::vector<uint64_t> key{uint64_t(reinterpret_cast<uintptr_t>(kernel.set_layout()))};
  for (uint32_t b = 0; b < c.views; ++b) {
    const Call::Bound& v = c.view[b];
    accesses.emplace_back(v.buffer->extent(), kernel.writes(b) ? kWrite | kRead : kRead);
    infos.push_back({v.buffer->handle(), v.offset, v.range});
    key.insert(key.end(), {v.serial, v.offset, v.range});
  }
  touch(accesses);
  const auto& vk = device_.vk();
  VkDescriptorSet set = VK_NULL_HANDLE;
  if (!infos.empty()) {
    // A set once written is never written again: it may be bound by a recording in flight.
    // It enters the cache only once written, so a failed allocation leaves no empty entry.
    auto it = sets_.find(key);
    if (it == sets_.end()) {
      const VkDescriptorSet fresh = descriptor_set(kernel);
      std::vector<VkWriteDescriptorSet> writes(infos.size());
      for (uint32_t i = 0; i < infos.size(); ++i) {
        writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        writes[i].dstSet = fresh;
        writes[i].dstBinding = i;
        writes[i].descriptorCount = 1;
        writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        writes[i].pBufferInfo = &infos[i];
      }
      vk.vkUpdateDescriptorSets(device_.handle(), uint32_t(writes.size()), writes.data(), 0, nullptr);
      it = sets_.emplace(std::move(key), fresh).first;
    }
    set = it->second;
  }
  vk.vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, kernel.pipeline());
  if (set)
    vk.vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, kernel.layout(), 0, 1, &set,
                               0, nullptr);
  if (c.push_bytes)
    vk.vkCmdPushConstants(cmd_, kernel.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, c.push_bytes, c.push.data());
  vk.vkCmdDispatch(cmd_, c.groups.x, c.groups.y, c.groups.z);
  ++dispatches_;
}

void Commands::copy(const Buffer& src, const Buffer& dst, uint64_t bytes, uint64_t src_offset,
                    uint64_t dst_offset) {
  Call c;
  c.kind = Call::Kind::Copy;
  c.bytes = bytes;
  c.add(src, src_offset, bytes);
  c.add(dst, dst_offset, bytes);
  issue(c);
}

void Commands::fill(const View& dst, uint32_t word) {
  Call c;
  c.kind = Call::Kind::Fill;
  c.word = word;
  c.add(*dst.buffer, dst.offset, dst.range);
  issue(c);
}

uint32_t Commands::timestamp() {
  if (!device_.info().timestamps)
    throw VulkanError(device_.label() + ": the compute queue has no timestamps", VK_ERROR_FEATURE_NOT_PRESENT);
  if (query_count_ == kMaxQueries)
    throw VulkanError(name_ + ": more than 4096 timestamps in one recording", VK_ERROR_TOO_MANY_OBJECTS);
  Call c;
  c.kind = Call::Kind::Timestamp;
  issue(c);
  return query_count_ - 1;
}

void Commands::record_timestamp() {
  const auto& vk = device_.vk();
  if (!queries_) {
    VkQueryPoolCreateInfo info{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    info.queryType = VK_QUERY_TYPE_TIMESTAMP;
    info.queryCount = kMaxQueries;
    VK_CHECK(vk.vkCreateQueryPool(device_.handle(), &info, nullptr, &queries_));
    device_.name(VK_OBJECT_TYPE_QUERY_POOL, queries_, name_ + " timestamps");
  }
  if (query_count_ == queries_reset_) {  // the next run of queries, reset before its first write
    const uint32_t run = std::min(std::max(2u, query_count_), kMaxQueries - query_count_);
    vk.vkCmdResetQueryPool(cmd_, queries_, query_count_, run);
    queries_reset_ += run;
  }
  vk.vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, query_count_);
  ++query_count_;
}

uint64_t Commands::submit(const std::vector<SemaphoreValue>& waits,
                          const std::vector<SemaphoreValue>& signals) {
  if (pending_) throw VulkanError(name_ + ": submitted twice without wait()", VK_ERROR_UNKNOWN);
  if (replaying_) {
    if (cursor_ == calls_.size()) {  // every call the same: the kept buffer as it is
      replaying_ = false;
      submitted_ = device_.submit(cmd_, waits, signals);
      pending_ = true;
      ++replays_;
      return submitted_;
    }
    diverge();
  }
  const auto& vk = device_.vk();
  if (any_write_) {
    // Device writes become visible to the host (mapped reads after wait()).
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vk.vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                            VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  }
  if (!held_.empty()) {
    // Shared memory given back to the family it is exchanged with, this recording's writes made
    // available first, for the other device's queue to take.
    std::vector<VkBufferMemoryBarrier> give;
    for (const auto& [b, family] : held_) {
      give.push_back(handoff(b, device_.compute_family(), family));
      give.back().srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    }
    vk.vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                            VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, 0, 0, nullptr, uint32_t(give.size()), give.data(),
                            0, nullptr);
    handoffs_ += uint32_t(give.size());
  }
  VK_CHECK(vk.vkEndCommandBuffer(cmd_));
  recording_ = false;
  submitted_ = device_.submit(cmd_, waits, signals);
  pending_ = true;
  complete_ = keep_;
  return submitted_;
}

void Commands::wait() {
  if (!pending_) return;
  device_.wait(submitted_);
  pending_ = false;
}

std::vector<double> Commands::timestamps_ns() const {
  if (!query_count_) return {};
  std::vector<uint64_t> raw(query_count_);
  VK_CHECK(device_.vk().vkGetQueryPoolResults(device_.handle(), queries_, 0, query_count_,
                                              raw.size() * sizeof(uint64_t), raw.data(),
                                              sizeof(uint64_t),
                                              VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
  return vk::timestamps_ns(raw, device_.info().timestamp_valid_bits, device_.info().timestamp_period_ns);
}

}  // namespace brigade::vk
