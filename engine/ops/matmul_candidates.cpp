#include "ops/matmul_candidates.h"

#include <algorithm>
#include <array>

#include "ops/matmul_split.h"
#include "ops/matmul_tiles.h"

namespace brigade::ops {

std::vector<std::optional<MatmulTiling>> candidate_tilings(const vk::PhysicalInfo& info, Precision format) {
  using V = MatmulTiling::Variant;
  const MatmulTiling chosen = matmul_tiling(info);
  std::vector<MatmulTiling> all = {
      chosen,
      {V::Registers, chosen.wg_x, chosen.wg_y, 16, 8, 16, chosen.subgroup},
      {V::Registers, 8, 8, 8, 8, 16, 0},
      {V::Registers, 8, 8, 16, 8, 16, 0},
      {V::Shared, 16, 16, 4, 4, 16, 0},
  };
  if (chosen.subgroup) {
    MatmulTiling square = chosen;
    square.tm = square.tn = 12;
    all.push_back(square);
  }
  // GPUs: the shared tiles matmul_tiling chooses among (128x128 staged 8 deep, 64x64, 32x32),
  // and 128x128 staged 16 deep, 64x128 and 64x64 of 8x8 outputs each.
  if (info.type != VK_PHYSICAL_DEVICE_TYPE_CPU) {
    all.insert(all.end(), {{V::Shared, 16, 16, 8, 8, 8, 0}, {V::Shared, 16, 16, 8, 8, 16, 0},
                           {V::Shared, 16, 8, 8, 8, 8, 0}, {V::Shared, 8, 8, 8, 8, 16, 0},
                           {V::Shared, 8, 8, 4, 4, 16, 0}});
    MatmulTiling grouped{V::Shared, 16, 8, 8, 8, 8, 0};  // 64x128, C's blocks in groups of 8 rows
    grouped.group = 8;
    all.push_back(grouped);
  }
  // 16-bit products: the matrix units where the device lists the type, and larger warp tiles.
  if (const auto matrix = matrix_tiling(info, format)) {
    for (const auto& [warps_m, warps_n, tiles_m, tiles_n, deeper] :
         {std::array{2u, 2u, 2u, 2u, 0u}, {2u, 2u, 4u, 4u, 0u}, {2u, 2u, 4u, 4u, 1u}, {2u, 2u, 4u, 2u, 0u},
          {2u, 4u, 4u, 2u, 0u}, {2u, 4u, 4u, 2u, 1u}, {4u, 2u, 2u, 4u, 0u}, {4u, 4u, 2u, 2u, 0u}}) {
      // Blocks of 4x4 to 8x8 matrices (64x64 to 128x128 of 16x16) in 4 to 16 warps, staged 2 or
      // 4 matrices deep.
      MatmulTiling t = *matrix;
      t.wg_y = warps_m, t.wg_x = warps_n, t.tm = tiles_m, t.tn = tiles_n, t.bk = (deeper ? 4 : 2) * matrix->lk;
      all.push_back(t);
      t.stages = 2;  // and with the next K tile staged while this one multiplies
      all.push_back(t);
      if (tiles_m * tiles_n >= 8) {  // and the large blocks with two K tiles in flight
        t.ahead = 2;
        all.push_back(t);
      }
    }
    // The large block double-buffered, one and two K tiles ahead, C's blocks in groups of 8 rows.
    MatmulTiling grouped = large_matrix_block(*matrix);
    grouped.group = 8;
    all.push_back(grouped);
    grouped.ahead = 2;
    all.push_back(grouped);
    // Every other shape the device lists for the type, in the default's block.
    for (const vk::MatrixShape& shape : info.matrix_units.shapes)
      if ((shape.element == vk::MatrixShape::Element::Bf16) == (format == Precision::Bf16) &&
          shape.m % 8 == 0 && shape.n % 8 == 0 && shape.k % 8 == 0) {
        MatmulTiling t = *matrix;
        t.lm = shape.m, t.ln = shape.n, t.lk = shape.k, t.bk = 2 * shape.k;
        all.push_back(t);
      }
    // Two measurements of the default's block: its inner loop alone (the first K tile multiplied
    // in place of every one, C unchecked), and its warps fed from memory with no staging.
    for (const auto feed : {MatmulTiling::Feed::StageOnce, MatmulTiling::Feed::Direct}) {
      MatmulTiling probe = *matrix;
      probe.feed = feed;
      all.push_back(probe);
    }
  }
  std::vector<std::optional<MatmulTiling>> out = {std::nullopt};
  for (const auto& t : all)
    if (std::none_of(out.begin() + 1, out.end(), [&](auto& o) { return o->name() == t.name(); }) &&
        t.shared_bytes() <= info.max_shared_memory &&
        t.wg_x * t.wg_y * (t.variant == V::Matrix ? t.subgroup : 1) <= info.max_workgroup_invocations)
      out.push_back(t);
  return out;
}

std::vector<MatmulTiling> product_candidates(const vk::PhysicalInfo& info, const CapturedProduct& c,
                                             const MatmulTiling& chosen, uint64_t workspace) {
  const MatmulParams& p = c.params;
  const bool units = is_half(p.a_format) && p.b_format == p.a_format;
  std::vector<MatmulTiling> out;
  auto add = [&](const MatmulTiling& t) {
    if (t.name() != chosen.name() && std::none_of(out.begin(), out.end(), [&](auto& o) { return o.name() == t.name(); }))
      out.push_back(t);
  };
  for (const std::optional<MatmulTiling>& t : candidate_tilings(info, p.a_format))
    if (t && t->feed == MatmulTiling::Feed::Staged && (units || t->variant != MatmulTiling::Variant::Matrix)) add(*t);
  const bool splits = workspace && !c.bias && !c.epilogue && !c.copy && splits_k(p) &&
                      chosen.variant != MatmulTiling::Variant::Registers;
  for (uint32_t parts = 1; splits && parts <= 16; parts *= 2) {
    MatmulTiling t = chosen;
    t.k_parts = parts;
    add(t);
  }
  return out;
}

}  // namespace brigade::ops
