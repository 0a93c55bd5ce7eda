#include "ops/column_sums.h"

#include <algorithm>
#include <string>

#include "ops/launch_geometry.h"
#include "ops/linear.h"
#include "shaders/column_sums.h"
#include "util/error.h"

namespace brigade::ops {
namespace {

constexpr uint64_t kRunWorkgroups = 1024;     // a GPU's choice of runs aims at about as many
constexpr uint64_t kRunLeastRowsPerLane = 16;  // and never has a lane walk fewer rows
constexpr uint32_t kMostRuns = 64;
constexpr uint64_t kRunAlign = 256;  // a partial sums' view starts on any device's storage offset alignment

}  // namespace

uint32_t gpu_column_runs(uint32_t workgroups, uint32_t rows, uint32_t lanes) {
  const uint64_t runs = std::min<uint64_t>({(kRunWorkgroups + workgroups - 1) / std::max(workgroups, 1u),
                                            rows / (uint64_t(std::max(lanes, 1u)) * kRunLeastRowsPerLane), kMostRuns});
  return uint32_t(std::max<uint64_t>(runs, 1));
}

ColumnSums::ColumnSums(vk::Commands& cmd, uint32_t items, uint32_t floats, uint32_t rows, ColumnWalk walk,
                       vk::Specialization spec, uint32_t outputs)
    : floats_(floats) {
  const bool cpu = cmd.device().info().type == VK_PHYSICAL_DEVICE_TYPE_CPU;
  const uint32_t lanes = walk.lanes ? walk.lanes : cpu ? 1 : BRIGADE_LANES_GPU;
  const uint32_t per_group = lanes == 1 ? BRIGADE_COLUMNS_CPU : BRIGADE_COLUMNS_GPU;
  spec_ = spec.set(1, lanes).set(2, per_group);
  // Capped: a Linear's or LayerNorm's width is the model's, and the kernels walk the columns
  // past the grid (shaders/column_sums.h).
  groups_ = capped_groups(items, per_group);
  const std::optional<vk::View>& w = cmd.workspace();
  // Each output's partial sums: a row of `floats` per run, starting on kRunAlign bytes.
  auto region = [&](uint64_t runs) { return (runs * floats * 4 + kRunAlign - 1) / kRunAlign * kRunAlign; };
  uint64_t runs = walk.runs;
  if (runs == 0) {
    runs = 1;
    if (!cpu && w && w->offset % kRunAlign == 0) {
      runs = gpu_column_runs(groups_.x, rows, lanes);
      while (runs > 1 && outputs * region(runs) > w->range) runs /= 2;
    }
  }
  groups_.y = uint32_t(runs);
  if (runs == 1) return;
  BRIGADE_EXPECT(runs <= 65535, "a column sum in " + std::to_string(runs) + " runs: at most 65535");
  BRIGADE_EXPECT(w && w->offset % kRunAlign == 0 && outputs * region(runs) <= w->range,
                 "a column sum in " + std::to_string(runs) + " runs needs " + std::to_string(outputs * region(runs)) +
                     " bytes of workspace starting on " + std::to_string(kRunAlign) + " bytes; the recording has " +
                     std::to_string(w ? w->range : 0));
  for (uint32_t i = 0; i < outputs; ++i)
    partials_.emplace_back(*w->buffer, w->offset + i * region(runs), runs * floats * 4);
}

void ColumnSums::finish(vk::Commands& cmd, std::initializer_list<vk::View> gradients) const {
  if (partials_.empty()) return;
  BRIGADE_EXPECT(gradients.size() == partials_.size(), "a column sum's gradients, one per output");
  size_t i = 0;
  for (const vk::View& g : gradients) linear_bias_backward(cmd, partials_[i++], g, runs(), floats_, ColumnWalk(0, 1));
}

}  // namespace brigade::ops
