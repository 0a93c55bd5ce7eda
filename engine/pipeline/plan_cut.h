// Cuts the partitioner's dynamic programme cannot make: under an interleaved schedule a
// stage's cap holds the sum of its V cells' footprints (cell c on stage c % K), not V equal
// shares; and where nothing fits, the cut whose fullest stage needs the least memory, by
// the exact footprints.
#pragma once

#include <cstdint>
#include <vector>

#include "pipeline/partition.h"

namespace brigade::pipeline {

// balance_min_max; where its cut holds a cell that never fits on a stage without a cap
// (`memory` says kNeverFits), cut again asking `memory` of every stage. The stages without a cap
// are not asked otherwise, so a search over many plans lays out no more cells than before.
// `floor` as for balance_min_max.
Partition balance_within_limits(const std::vector<LayerCost>& layers, const std::vector<StageSpec>& cells,
                                const CellMemory& memory, const CellMemory& floor = {});

// The cut into cells.size() cells (cell c on stage c % K, cells[c] its stage's spec, cap
// whole) minimizing the slowest cell's time with each stage's cells' footprints (`memory`,
// kNeverFits for a cell that cannot be there) summing to at most its cap. A depth-first
// search, cell by cell, bounded by the best cut found; empty when no cut fits, or when the
// search passes `budget` cells tried without finishing.
std::vector<uint32_t> cut_under_stage_caps(const std::vector<LayerCost>& layers, const std::vector<StageSpec>& cells,
                                           uint32_t K, const CellMemory& memory, uint64_t budget = 1u << 20);

// The cut whose fullest stage (its cells' footprints summed) needs the least memory, caps
// and times aside: exact by dynamic programming with a cell a stage (a cell whose `floor`, a
// bound under `memory`, is over the best found is not asked of `memory`), else the search
// above within `budget`.
std::vector<uint32_t> cut_least_memory(size_t L, size_t C, uint32_t K, const CellMemory& memory,
                                       const CellMemory& floor = {}, uint64_t budget = 1u << 20);

}  // namespace brigade::pipeline
