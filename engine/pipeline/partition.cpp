#include "pipeline/partition.h"

#include <algorithm>
#include <limits>

#include "util/units.h"
#include "util/error.h"

namespace brigade::pipeline {

uint32_t Partition::first_layer(uint32_t stage) const {
  uint32_t first = 0;
  for (uint32_t k = 0; k < stage; ++k) first += sizes[k];
  return first;
}

double StageSpec::time(const std::vector<LayerCost>& layers, size_t first, size_t last) const {
  double t = 0;
  for (size_t l = first; l < last; ++l) t += layer_times.empty() ? layers[l].time / speed : layer_times[l];
  return t;
}

namespace {

Partition evaluate(const std::vector<LayerCost>& layers, const std::vector<StageSpec>& stages,
                   std::vector<uint32_t> sizes, const CellMemory& memory) {
  Partition p;
  p.sizes = std::move(sizes);
  uint32_t l = 0;
  for (size_t k = 0; k < stages.size(); ++k) {
    uint64_t m = 0;
    for (uint32_t j = 0; j < p.sizes[k]; ++j) m += layers[l + j].memory;
    if (memory) m = memory(k, l, l + p.sizes[k]);
    p.stage_time.push_back(stages[k].time(layers, l, l + p.sizes[k]));
    l += p.sizes[k];
    p.stage_memory.push_back(m);
    p.max_time = std::max(p.max_time, p.stage_time.back());
  }
  return p;
}

void check_stages(const std::vector<LayerCost>& layers, const std::vector<StageSpec>& stages) {
  if (stages.empty()) throw UserError("a pipeline needs at least one stage");
  if (stages.size() > layers.size())
    throw UserError(std::to_string(stages.size()) + " stages for a model of " +
                    std::to_string(layers.size()) + " layers; use at most one stage per layer");
  for (auto& s : stages) {
    if (!(s.speed > 0)) throw UserError("a stage's device speed must be positive");
    BRIGADE_EXPECT(s.layer_times.empty() || s.layer_times.size() == layers.size(),
                   "a profile times every layer of the model");
  }
}

}  // namespace

Partition balance_min_max(const std::vector<LayerCost>& layers, const std::vector<StageSpec>& stages,
                          const CellMemory& memory, const CellMemory& floor) {
  check_stages(layers, stages);
  const size_t L = layers.size(), K = stages.size();
  std::vector<uint64_t> mem_prefix(L + 1, 0);
  for (size_t i = 0; i < L; ++i) mem_prefix[i + 1] = mem_prefix[i] + layers[i].memory;
  // time_prefix[k][i]: layers 0..i-1 on stage k's device.
  std::vector<std::vector<double>> time_prefix(K, std::vector<double>(L + 1, 0));
  for (size_t k = 0; k < K; ++k)
    for (size_t i = 0; i < L; ++i) time_prefix[k][i + 1] = time_prefix[k][i] + stages[k].time(layers, i, i + 1);
  const double inf = std::numeric_limits<double>::infinity();
  // best[k][i]: the smallest possible slowest-stage time when stages 0..k-1 hold layers 0..i-1.
  std::vector<std::vector<double>> best(K + 1, std::vector<double>(L + 1, inf));
  std::vector<std::vector<uint32_t>> cut(K + 1, std::vector<uint32_t>(L + 1, 0));
  best[0][0] = 0;
  // Stage k-1 holding layers j..i-1: the candidates for each i in order of their time, then of
  // j (ties: the earliest cut), so that the first whose memory fits is the best and the cell
  // memory, which can cost a layout of the cell, is asked of as few as that takes.
  std::vector<std::pair<double, uint32_t>> candidates;
  for (size_t k = 1; k <= K; ++k) {
    const StageSpec& st = stages[k - 1];
    for (size_t i = k; i <= L - (K - k); ++i) {
      candidates.clear();
      for (size_t j = k - 1; j < i; ++j)
        if (best[k - 1][j] != inf)
          candidates.emplace_back(std::max(best[k - 1][j], time_prefix[k - 1][i] - time_prefix[k - 1][j]), uint32_t(j));
      std::sort(candidates.begin(), candidates.end());
      for (const auto& [t, j] : candidates)
        if (!st.memory_cap ||
            ((!floor || floor(k - 1, j, i) <= st.memory_cap) &&
             (memory ? memory(k - 1, j, i) : mem_prefix[i] - mem_prefix[j]) <= st.memory_cap)) {
          best[k][i] = t, cut[k][i] = j;
          break;
        }
    }
  }
  if (best[K][L] == inf) {
    uint64_t largest = 0;
    for (auto& l : layers) largest = std::max(largest, l.memory);
    throw NoFit("the model (" + format_bytes(mem_prefix[L]) + " over " + std::to_string(L) +
                    " layers, largest layer " + format_bytes(largest) + ") does not fit " +
                    std::to_string(K) + " stages under their memory caps; add stages, raise "
                    "`memory_cap`, or use more micro-batches or `remat` always");
  }
  std::vector<uint32_t> sizes(K);
  for (size_t k = K, i = L; k > 0; --k) {
    const uint32_t j = cut[k][i];
    sizes[k - 1] = uint32_t(i - j);
    i = j;
  }
  return evaluate(layers, stages, sizes, memory);
}

Partition balance_manual(const std::vector<LayerCost>& layers, const std::vector<StageSpec>& stages,
                         const std::vector<uint32_t>& sizes) {
  check_stages(layers, stages);
  if (sizes.size() != stages.size())
    throw UserError("`balance`: " + std::to_string(sizes.size()) + " cell sizes for " +
                    std::to_string(stages.size()) + " stages; give one size per device in `devices`");
  uint64_t total = 0;
  for (uint32_t s : sizes) total += s;
  if (total != layers.size())
    throw UserError("`balance`: the cell sizes add up to " + std::to_string(total) +
                    " layers but the model has " + std::to_string(layers.size()));
  return evaluate(layers, stages, sizes, {});
}

std::vector<uint32_t> parse_balance(const std::string& text) {
  const auto sizes = parse_uint_list(text);
  if (!sizes || std::count(sizes->begin(), sizes->end(), 0u))
    throw UserError("`balance`: '" + text + "' is not a list of positive layer counts such as 3,5,4");
  return *sizes;
}

}  // namespace brigade::pipeline
