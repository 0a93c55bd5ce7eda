#include "optim/clip.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "ops/launch_geometry.h"
#include "shaders/optim.h"
#include "util/error.h"

namespace brigade::optim {

Clip clip(double squared_sum, double max_norm) {
  if (!(max_norm > 0))
    throw UserError("gradient clipping: max_norm is " + std::to_string(max_norm) +
                    ", expected a positive number");
  Clip c;
  c.total_norm = std::sqrt(squared_sum);
  const double coef = max_norm / (c.total_norm + 1e-6);
  c.grad_scale = coef >= 1 ? 1.0 : coef;  // written so that a NaN coefficient stays NaN
  return c;
}

uint32_t grad_norm_groups(uint32_t n) {
  const uint32_t groups = vk::groups_for(n, BRIGADE_NORM_GROUP_ITEMS);
  return std::clamp<uint32_t>(groups, 1, BRIGADE_NORM_MAX_GROUPS);
}

uint64_t grad_norm_bytes(uint32_t n) { return uint64_t(grad_norm_groups(n)) * (4 + 16); }

void scale(vk::Commands& cmd, vk::View x, uint32_t n, float alpha) {
  cmd.dispatch(cmd.device().kernel("scale"), {x}, shaders::ScalePush{n, alpha},
               ops::capped_groups(n, BRIGADE_WG_OPTIM));
}

GradNorm::GradNorm(vk::Device& device, const std::vector<vk::View>& grads) {
  // Per workgroup of a run: its tensor's first float in the run's window, the tensor's length,
  // the workgroup's index among the tensor's and their count (shaders/grad_norm_partial.comp).
  // A run binds a window of its buffer no wider than the device's maxStorageBufferRange,
  // starting where a view may start: an arena of any size takes as many runs as that needs.
  std::vector<std::vector<uint32_t>> tables;
  const uint64_t widest_window = device.info().max_storage_buffer_range;
  const uint64_t align = std::max<uint64_t>(device.info().min_storage_offset_alignment, 1);
  uint64_t widest = 0;  // elements per workgroup, for the reduction's width
  for (const vk::View& g : grads) {
    BRIGADE_EXPECT(&g.buffer->device() == &device,
                         "GradNorm: gradient '" + g.buffer->name() + "' is on another device");
    BRIGADE_EXPECT(
        g.range % 4 == 0 && g.range > 0,
        "GradNorm: gradient '" + g.buffer->name() + "' is not a non-empty float tensor");
    const vk::Buffer& whole = g.buffer->whole();
    const uint64_t begin = g.buffer->offset_in_whole() + g.offset, end = begin + g.range;
    if (runs_.empty() || runs_.back().window.buffer != &whole || begin < runs_.back().window.offset ||
        end - runs_.back().window.offset > widest_window) {
      runs_.push_back({vk::View(whole, begin / align * align, 0), {}, {}, {}});
      tables.emplace_back();
    }
    vk::View& window = runs_.back().window;
    window.range = std::max(window.range, end - window.offset);
    const uint32_t n = uint32_t(g.range / 4), groups = grad_norm_groups(n);
    const uint32_t first = uint32_t((begin - window.offset) / 4);
    for (uint32_t j = 0; j < groups; ++j) tables.back().insert(tables.back().end(), {first, n, j, groups});
    runs_.back().groups.push_back(groups);
    widest = std::max<uint64_t>(widest, n / groups);
  }
  width_ = ops::reduction_width(device, widest);
  for (size_t r = 0; r < runs_.size(); ++r) {
    Run& run = runs_[r];
    const std::string what = run.window.buffer->name() + " norm ";
    const uint64_t groups = tables[r].size() / 4;
    // In host memory, as the partial sums: written without a staging copy (a few words).
    run.table = vk::Buffer(device, groups * 16, vk::Category::Scratch, what + "table", vk::Residency::Host);
    vk::upload(run.table, tables[r].data(), groups * 16);
    run.partials = vk::Buffer(device, groups * 4, vk::Category::Scratch, what + "partials", vk::Residency::Host);
  }
}

void GradNorm::record(vk::Commands& cmd) const {
  for (const Run& run : runs_) dispatch(cmd, run, run.window);
}

void GradNorm::record(vk::Commands& cmd, const vk::Buffer& from, const vk::Buffer& to) const {
  for (const Run& run : runs_) {
    BRIGADE_EXPECT(run.window.buffer == &from && to.size() == from.size(),
                   "GradNorm: '" + to.name() + "' is not laid out as '" + run.window.buffer->name() + "'");
    dispatch(cmd, run, vk::View(to, run.window.offset, run.window.range));
  }
}

// One workgroup per table entry, folded into rows of at most max_groups() (an arena of many
// tensors holds more entries than a dispatch's 65535 along x).
void GradNorm::dispatch(vk::Commands& cmd, const Run& run, vk::View window) const {
  const uint64_t entries = run.partials.size() / 4;
  const uint32_t x = uint32_t(std::min<uint64_t>(entries, ops::max_groups().load(std::memory_order_relaxed)));
  cmd.dispatch(cmd.device().kernel("grad_norm_partial", vk::Specialization().set(0, width_)),
               {window, run.table, run.partials}, nullptr, 0, {x, uint32_t((entries + x - 1) / x)});
}

double GradNorm::squared(std::vector<double>* each) const {
  double sum = 0;
  std::vector<float> partial;
  if (each) each->clear();
  for (const Run& run : runs_) {
    partial.resize(run.partials.size() / 4);
    vk::download(run.partials, partial.data(), run.partials.size());
    size_t w = 0;
    for (uint32_t groups : run.groups) {
      double own = 0;
      for (uint32_t j = 0; j < groups; ++j, ++w) sum += partial[w], own += partial[w];
      if (each) each->push_back(own);
    }
  }
  return sum;
}

}  // namespace brigade::optim
