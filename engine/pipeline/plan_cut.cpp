#include "pipeline/plan_cut.h"

#include <algorithm>
#include <functional>
#include <limits>

namespace brigade::pipeline {

namespace {

// Each cell's footprint, asked of `memory` once.
class Footprints {
 public:
  Footprints(size_t L, size_t C, const CellMemory& memory) : L_(L), memory_(memory), known_((L + 1) * (L + 1) * C, kUnknown) {}
  uint64_t operator()(size_t c, size_t first, size_t last) {
    uint64_t& m = known_[(c * (L_ + 1) + first) * (L_ + 1) + last];
    if (m == kUnknown) m = memory_(c, first, last);
    return m;
  }

 private:
  static constexpr uint64_t kUnknown = kNeverFits - 1;
  size_t L_;
  const CellMemory& memory_;
  std::vector<uint64_t> known_;
};

// Cell by cell from `first`: each stage's running sum of its cells' footprints, the cut so
// far, and the best complete cut by `score` (smaller is better), which bounds the rest.
struct Search {
  size_t L = 0, C = 0;
  uint32_t K = 1;
  Footprints* footprint = nullptr;
  std::vector<uint64_t> sums, caps;
  std::vector<uint32_t> sizes, best;
  double best_score = std::numeric_limits<double>::infinity();
  uint64_t budget = 0;
  // The score of a cut whose cells so far score `so_far` and whose next cell is [first, last);
  // never below so_far, and with `monotone` never lower for a longer cell.
  std::function<double(double so_far, size_t c, size_t first, size_t last)> score;
  bool monotone = false;

  void from(size_t c, size_t first, double so_far) {
    const size_t k = c % K, rest = C - 1 - c;
    for (size_t last = first + 1; last + rest <= L; ++last) {
      if (c + 1 == C && last != L) continue;
      if (budget == 0) return;
      --budget;
      const double s = score(so_far, c, first, last);
      if (s >= best_score) {
        if (monotone) break;  // a longer cell only scores worse
        continue;
      }
      const uint64_t m = (*footprint)(c, first, last);
      if (m == kNeverFits || (caps[k] && sums[k] + m > caps[k])) continue;
      sums[k] += m, sizes[c] = uint32_t(last - first);
      if (c + 1 == C) best_score = s, best = sizes;
      else from(c + 1, last, s);
      sums[k] -= m;
    }
  }
};

}  // namespace

Partition balance_within_limits(const std::vector<LayerCost>& layers, const std::vector<StageSpec>& cells,
                                const CellMemory& memory, const CellMemory& floor) {
  Partition p = balance_min_max(layers, cells, memory, floor);
  for (uint32_t c = 0, first = 0; c < cells.size(); first += p.sizes[c++])
    if (!cells[c].memory_cap && memory(c, first, first + p.sizes[c]) == kNeverFits) {
      std::vector<StageSpec> asked = cells;
      for (StageSpec& st : asked)
        if (!st.memory_cap) st.memory_cap = kNeverFits - 1;
      return balance_min_max(layers, asked, memory, floor);
    }
  return p;
}

std::vector<uint32_t> cut_under_stage_caps(const std::vector<LayerCost>& layers, const std::vector<StageSpec>& cells,
                                           uint32_t K, const CellMemory& memory, uint64_t budget) {
  Footprints footprint(layers.size(), cells.size(), memory);
  Search s;
  s.L = layers.size(), s.C = cells.size(), s.K = K, s.footprint = &footprint, s.budget = budget;
  s.sums.assign(K, 0), s.sizes.assign(s.C, 0);
  for (uint32_t k = 0; k < K; ++k) s.caps.push_back(cells[k].memory_cap);
  // The slowest cell's time, which a longer cell only raises.
  s.score = [&](double so_far, size_t c, size_t first, size_t last) {
    return std::max(so_far, cells[c].time(layers, first, last));
  };
  s.monotone = true;
  s.from(0, 0, 0);
  return s.best;
}

std::vector<uint32_t> cut_least_memory(size_t L, size_t C, uint32_t K, const CellMemory& memory, const CellMemory& floor,
                                       uint64_t budget) {
  Footprints footprint(L, C, memory);
  if (C == K) {  // a cell a stage: min-max by dynamic programming, as the partitioner cuts
    const uint64_t none = kNeverFits;
    // fullest[c][i]: the least fullest cell with cells 0..c-1 holding layers 0..i-1.
    std::vector<std::vector<uint64_t>> fullest(C + 1, std::vector<uint64_t>(L + 1, none));
    std::vector<std::vector<uint32_t>> cut(C + 1, std::vector<uint32_t>(L + 1, 0));
    fullest[0][0] = 0;
    // The shortest cells first: their footprints bound the longer ones' early. Ties go to
    // the earliest cut.
    for (size_t c = 1; c <= C; ++c)
      for (size_t i = c; i + (C - c) <= L; ++i)
        for (size_t j = i; j-- > c - 1;) {
          if (fullest[c - 1][j] == none || (floor && fullest[c][i] != none && floor(c - 1, j, i) > fullest[c][i])) continue;
          const uint64_t f = std::max(fullest[c - 1][j], footprint(c - 1, j, i));
          if (f < fullest[c][i] || (f == fullest[c][i] && j < cut[c][i])) fullest[c][i] = f, cut[c][i] = uint32_t(j);
        }
    std::vector<uint32_t> sizes(C);
    for (size_t c = C, i = L; c > 0; --c) sizes[c - 1] = uint32_t(i - cut[c][i]), i = cut[c][i];
    return sizes;
  }
  Search s;
  s.L = L, s.C = C, s.K = K, s.footprint = &footprint, s.budget = budget;
  s.sums.assign(K, 0), s.caps.assign(K, 0), s.sizes.assign(C, 0);
  // The fullest stage's sum with the cell added (a longer cell holds about as much more, but
  // its boundary may be smaller: not monotone).
  s.score = [&](double so_far, size_t c, size_t first, size_t last) {
    return std::max(so_far, double(s.sums[c % K] + footprint(c, first, last)));
  };
  s.from(0, 0, 0);
  return s.best;
}

}  // namespace brigade::pipeline
