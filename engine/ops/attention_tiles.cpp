#include "ops/attention_tiles.h"

#include <algorithm>
#include <cmath>

#include "ops/matmul_tiles.h"
#include "shaders/attention.h"
#include "util/error.h"
#include "vk/spirv.h"

namespace brigade::ops {

std::string AttentionTiling::name() const {
  return std::string(emulated ? "matrix tiles on plain invocations " : "matrix units ") + std::to_string(lm) + "x" +
         std::to_string(ln) + "x" + std::to_string(lk) + ", " + std::to_string(warps) + " warps of " +
         std::to_string(lanes) + ", keys in blocks of " + std::to_string(bc);
}

uint32_t AttentionTiling::shared_bytes(uint32_t HS) const {
  // shaders/attention_tiles_forward.comp: queries, keys, values and P in 16 bits, then F and R.
  const uint32_t br = warps * lm, pad = BRIGADE_ATTENTION_TILES_PAD;
  return 2 * ((br + 2 * bc) * (HS + pad) + br * (bc + pad)) + 4 * br * (std::max(bc, HS) + 1);
}

std::optional<AttentionTiling> attention_tiling(const vk::PhysicalInfo& device, Precision element, uint32_t HS) {
  const std::optional<MatmulTiling> m = default_matrix_tiling(device, element);
  if (!m || HS % m->lk || HS % m->ln || HS % 8) return std::nullopt;
  for (uint32_t warps = 4; warps >= 1; warps /= 2) {
    AttentionTiling t{m->lm, m->ln, m->lk, m->subgroup, warps, 2 * std::max(m->ln, m->lk)};
    if (t.shared_bytes(HS) <= device.max_shared_memory && warps * t.lanes <= device.max_workgroup_invocations &&
        (t.lm * HS) % (2 * t.lanes) == 0)
      return t;
  }
  return std::nullopt;
}

AttentionTiling emulated_attention_tiling(uint32_t lm, uint32_t ln, uint32_t lk, uint32_t lanes, uint32_t warps) {
  return {lm, ln, lk, lanes, warps, 2 * std::max(ln, lk), true};
}

void attention_tiles_forward(vk::Commands& cmd, const AttentionTiling& t, vk::View qkv, vk::View y, vk::View lse,
                             uint32_t B, uint32_t T, uint32_t C, uint32_t NH, Precision format) {
  const vk::PhysicalInfo& device = cmd.device().info();
  BRIGADE_EXPECT(is_half(format), "attention on matrix tiles reads and writes 16-bit qkv and y");
  BRIGADE_EXPECT(NH > 0 && C % NH == 0, "attention: C a multiple of NH");
  const uint32_t HS = C / NH;
  const uint64_t rows = uint64_t(B) * T;
  BRIGADE_EXPECT_BYTES(qkv, stored_bytes(rows * 3 * C, format), "attention qkv");
  BRIGADE_EXPECT_BYTES(y, stored_bytes(rows * C, format), "attention y");
  BRIGADE_EXPECT_FLOATS(lse, rows * NH, "attention lse");
  BRIGADE_EXPECT(t.lm && t.ln && t.lk && t.lanes && t.lm % 8 == 0 && t.ln % 8 == 0 && t.lk % 8 == 0 &&
                     HS % t.ln == 0 && HS % t.lk == 0 && t.bc % t.ln == 0 && t.bc % t.lk == 0 &&
                     (t.lm * HS) % (2 * t.lanes) == 0 && (!t.emulated || (t.lm * t.ln) % t.lanes == 0),
                 "attention tiling " + t.name() + " does not fit heads of " + std::to_string(HS) +
                     ": matrix sides in multiples of 8, the head size and the key block multiples of the matrices' n "
                     "and k, a warp's outputs shared evenly by its lanes");
  BRIGADE_EXPECT(qkv.offset % 16 == 0 && y.offset % 4 == 0, "attention on matrix tiles: qkv on 16 bytes, y on 4");
  BRIGADE_EXPECT(t.shared_bytes(HS) <= device.max_shared_memory && t.warps * t.lanes <= device.max_workgroup_invocations,
                 "attention tiling " + t.name() + " needs more shared memory or invocations than the device has");
  BRIGADE_EXPECT(B <= 65535 && NH <= 65535, "attention on matrix tiles: at most 65535 samples and heads");
  if (B == 0 || T == 0) return;
  std::string kernel = "attention_tiles_forward";
  if (!t.emulated) {
    kernel += std::string("_coopmat_") + precision_name(format);
    bool listed = false;
    for (const vk::MatrixShape& s : device.matrix_units.shapes)
      listed |= s.element == (format == Precision::Bf16 ? vk::MatrixShape::Element::Bf16 : vk::MatrixShape::Element::Fp16) &&
                s.m == t.lm && s.n == t.ln && s.k == t.lk;
    BRIGADE_EXPECT(listed && device.matrix_units.usable() && t.lanes == device.subgroup_size && vk::has_shader(kernel),
                   "attention tiling " + t.name() + " is not a product " + device.name + " lists for " +
                       precision_name(format) + " in subgroups of " + std::to_string(device.subgroup_size));
  }
  vk::Specialization spec;
  spec.set(BRIGADE_ATTENTION_SPEC_HS, HS)
      .set(BRIGADE_ATTENTION_SPEC_BC, t.bc)
      .set(BRIGADE_ATTENTION_TILES_SPEC_WG, t.warps * t.lanes)
      .set(BRIGADE_ATTENTION_TILES_SPEC_LM, t.lm)
      .set(BRIGADE_ATTENTION_TILES_SPEC_LN, t.ln)
      .set(BRIGADE_ATTENTION_TILES_SPEC_LK, t.lk)
      .set(BRIGADE_ATTENTION_TILES_SPEC_LANES, t.lanes)
      .set(BRIGADE_ATTENTION_TILES_SPEC_WARPS, t.warps)
      .set(BRIGADE_ATTENTION_TILES_SPEC_FORMAT, uint32_t(format));
  cmd.dispatch(cmd.device().kernel(kernel, spec), {qkv, y, lse},
               shaders::AttentionPush{B, T, C, NH, 1.0f / std::sqrt(float(HS))},
               {vk::groups_for(T, t.warps * t.lm), NH, B});
}

}  // namespace brigade::ops
