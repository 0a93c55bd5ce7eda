#include "ops/attention_tiles.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <numeric>

#include "ops/launch_geometry.h"
#include "ops/matmul_tiles.h"
#include "shaders/attention.h"
#include "util/error.h"
#include "vk/spirv.h"

namespace brigade::ops {

std::string per_pass(const AttentionTiling::PerPass& v) {
  if (v[0] == v[1] && v[1] == v[2]) return std::to_string(v[0]);
  return std::to_string(v[0]) + "/" + std::to_string(v[1]) + "/" + std::to_string(v[2]);
}

std::string AttentionTiling::name() const {
  return std::string(emulated ? "matrix tiles on plain invocations " : "matrix units ") + std::to_string(lm) + "x" +
         std::to_string(ln) + "x" + std::to_string(lk) + ", up to " + per_pass(warps) + " warps of " +
         std::to_string(lanes) + ", blocks of " + per_pass(bc);
}

uint32_t AttentionTiling::shared_bytes(uint32_t HS, TilesPass pass, uint32_t w) const {
  // shaders/attention_tiles_*.comp: 16-bit tiles of rows (this side's, the other side's) and of
  // P or dS, then the products' floats (a block's scores: the sums stay in registers) and the
  // forward's factors (one a row, along LN floats), its rows' m and l and its runs' largest
  // scores and sums (a run eight scores), the keys' pass's lse and delta.
  const uint32_t block = bc[size_t(pass)];
  const uint32_t br = w * lm, pad = BRIGADE_ATTENTION_TILES_PAD, rows = (HS + pad) * 2, probs = (block + pad) * 2;
  switch (pass) {
    case TilesPass::Forward:
      return br * rows + 2 * block * rows + br * probs + br * block * 4 + br * ln * 4 + 2 * br * 4 +
             2 * br * (block / 8) * 4;
    case TilesPass::Query: return 2 * br * rows + 2 * block * rows + br * probs + 2 * br * block * 4;
    case TilesPass::KeyValue: return 2 * br * rows + 2 * block * rows + 2 * br * probs + 2 * br * block * 4 + 2 * block * 4;
  }
  return 0;
}

uint32_t AttentionTiling::warps_for(uint32_t HS, TilesPass pass, uint32_t max_shared) const {
  for (uint32_t w = warps[size_t(pass)]; w >= 1; w /= 2)
    if (shared_bytes(HS, pass, w) <= max_shared) return w;
  return 0;
}

namespace {

// BRIGADE_ATTENTION_BLOCKS, read once: "WARPS,ROWS" for every pass, or three such separated by
// ';' (the forward's, the queries' pass's, the keys' pass's), in place of the default blocks (up
// to 4 warps, blocks of two matrices' width), so that blocks `bench attention` found faster can
// be tried on a whole step before they become the default (tools/gpu-check.sh's flash part).
struct Blocks {
  AttentionTiling::PerPass warps{}, rows{};
  std::string text;  // as set; empty: the default's blocks
  bool asked() const { return !text.empty(); }
};

const Blocks& blocks_asked() {
  static const Blocks asked = [] {
    Blocks b;
    const char* env = std::getenv("BRIGADE_ATTENTION_BLOCKS");
    if (!env || !*env) return b;
    b.text = env;
    const auto fail = [&] {
      throw UserError("BRIGADE_ATTENTION_BLOCKS is '" + b.text +
                      "'; expected WARPS,ROWS (up to 1 to 32 warps of rows a workgroup, blocks of 1 to 1024 rows; "
                      "e.g. 4,32), or three such separated by ';' for the forward, the queries' and the keys' passes");
    };
    char tail = 0;
    const int n = std::sscanf(env, "%u,%u;%u,%u;%u,%u%c", &b.warps[0], &b.rows[0], &b.warps[1], &b.rows[1],
                              &b.warps[2], &b.rows[2], &tail);
    if (n == 2)
      b.warps[1] = b.warps[2] = b.warps[0], b.rows[1] = b.rows[2] = b.rows[0];
    else if (n != 6)
      fail();
    for (size_t i = 0; i < 3; ++i)
      if (b.warps[i] < 1 || b.warps[i] > 32 || b.rows[i] < 1 || b.rows[i] > 1024) fail();
    return b;
  }();
  return asked;
}

}  // namespace

AttentionTiling attention_tiling(const MatmulTiling& m) {
  AttentionTiling t{m.lm, m.ln, m.lk, m.subgroup};
  t.set_blocks(4, 2 * std::max(m.ln, m.lk));
  const Blocks& asked = blocks_asked();
  if (asked.asked()) {
    for (uint32_t rows : asked.rows)
      if (rows % m.ln || rows % m.lk)
        throw UserError("BRIGADE_ATTENTION_BLOCKS=" + asked.text + ": blocks of " + std::to_string(rows) +
                        " rows are not a multiple of the matrices' " + std::to_string(std::max(m.ln, m.lk)));
    t.warps = asked.warps, t.bc = asked.rows;
  }
  return t;
}

uint32_t heads_multiple(const AttentionTiling& t) { return std::lcm(std::lcm(t.ln, t.lk), 8u); }

std::optional<AttentionTiling> attention_tiling(const vk::PhysicalInfo& device, Precision element, uint32_t HS) {
  const std::optional<MatmulTiling> m = default_matrix_tiling(device, element);
  if (!m) return std::nullopt;
  const AttentionTiling t = attention_tiling(*m);
  if (HS % heads_multiple(t)) return std::nullopt;
  for (TilesPass pass : {TilesPass::Forward, TilesPass::Query, TilesPass::KeyValue}) {
    if (t.warps_for(HS, pass, device.max_shared_memory)) continue;
    // Blocks asked for that do not fit are refused, not left for the matrix form unsaid.
    if (blocks_asked().asked())
      throw UserError("BRIGADE_ATTENTION_BLOCKS=" + blocks_asked().text + ": one warp of the " +
                      (pass == TilesPass::Forward ? "forward" : pass == TilesPass::Query ? "queries' pass" : "keys' pass") +
                      " on heads of " + std::to_string(HS) + " in blocks of " + std::to_string(t.bc[size_t(pass)]) +
                      " rows needs " + std::to_string(t.shared_bytes(HS, pass, 1)) + " bytes of shared memory; " +
                      device.name + " has " + std::to_string(device.max_shared_memory));
    return std::nullopt;
  }
  return t;
}

AttentionTiling emulated_attention_tiling(uint32_t lm, uint32_t ln, uint32_t lk, uint32_t lanes, uint32_t warps) {
  AttentionTiling t{lm, ln, lk, lanes};
  t.set_blocks(warps, 2 * std::max(ln, lk));
  t.emulated = true;
  return t;
}

namespace {

const char* kernel_of(TilesPass pass) {
  return pass == TilesPass::Forward ? "attention_tiles_forward"
         : pass == TilesPass::Query ? "attention_tiles_backward_query"
                                    : "attention_tiles_backward_key_value";
}

// Records one pass over the B samples' NH heads, after checking the tiling fits the heads and
// the device.
void dispatch(vk::Commands& cmd, const AttentionTiling& t, TilesPass pass, std::initializer_list<vk::View> views,
              uint32_t B, uint32_t T, uint32_t C, uint32_t NH, Precision format, bool copy = false) {
  const vk::PhysicalInfo& device = cmd.device().info();
  const uint32_t HS = C / NH;
  BRIGADE_EXPECT(t.lm && t.ln && t.lk && t.lanes && t.lm % 8 == 0 && t.ln % 8 == 0 && t.lk % 8 == 0 &&
                     HS % t.ln == 0 && HS % t.lk == 0 && t.bc[size_t(pass)] % t.ln == 0 &&
                     t.bc[size_t(pass)] % t.lk == 0 &&
                     (!t.emulated || (t.lm * t.ln) % t.lanes == 0),
                 "attention tiling " + t.name() + " does not fit heads of " + std::to_string(HS) +
                     ": matrix sides in multiples of 8, the head size and the blocks multiples of the matrices' n "
                     "and k, a matrix's elements shared evenly by its lanes");
  const uint32_t warps = t.warps_for(HS, pass, device.max_shared_memory);
  BRIGADE_EXPECT(warps && warps * t.lanes <= device.max_workgroup_invocations,
                 "attention tiling " + t.name() + " needs more shared memory or invocations than the device has");
  BRIGADE_EXPECT(NH <= device.max_workgroup_count[1], "attention on matrix tiles: at most " +
                                                         std::to_string(device.max_workgroup_count[1]) + " heads");
  std::string kernel = kernel_of(pass);
  if (!t.emulated) {
    kernel += std::string("_coopmat_") + precision_name(format);
    BRIGADE_EXPECT(runs_matrix(device, format, t.lm, t.ln, t.lk, t.lanes) && vk::has_shader(kernel),
                   "attention tiling " + t.name() + " is not a product " + device.name + " lists for " +
                       precision_name(format) + " in subgroups of " + std::to_string(device.matrix_units.lanes));
  }
  vk::Specialization spec;
  spec.set(BRIGADE_ATTENTION_SPEC_HS, HS)
      .set(BRIGADE_ATTENTION_SPEC_BC, t.bc[size_t(pass)])
      .set(BRIGADE_ATTENTION_TILES_SPEC_WG, warps * t.lanes)
      .set(BRIGADE_ATTENTION_TILES_SPEC_LM, t.lm)
      .set(BRIGADE_ATTENTION_TILES_SPEC_LN, t.ln)
      .set(BRIGADE_ATTENTION_TILES_SPEC_LK, t.lk)
      .set(BRIGADE_ATTENTION_TILES_SPEC_LANES, t.lanes)
      .set(BRIGADE_ATTENTION_TILES_SPEC_WARPS, warps)
      .set(BRIGADE_ATTENTION_TILES_SPEC_FORMAT, uint32_t(format))
      .set(BRIGADE_ATTENTION_TILES_SPEC_COPY, copy);
  // Samples on z, at most the grid's limit (lowered by ops::max_groups in the tests) a dispatch.
  const vk::Kernel& k = cmd.device().kernel(kernel, spec);
  const uint32_t most = std::max(1u, std::min(max_groups().load(std::memory_order_relaxed), device.max_workgroup_count[2]));
  for (uint32_t first = 0; first < B; first += most)
    cmd.dispatch(k, views, shaders::AttentionPush{B, T, C, NH, 1.0f / std::sqrt(float(HS)), first},
                 {vk::groups_for(T, warps * t.lm), NH, std::min(most, B - first)});
}

// The views every pass reads, checked.
void expect_views(vk::View qkv, vk::View y, vk::View lse, uint32_t B, uint32_t T, uint32_t C, uint32_t NH,
                  Precision format) {
  BRIGADE_EXPECT(is_half(format), "attention on matrix tiles reads and writes 16-bit qkv and y");
  BRIGADE_EXPECT(NH > 0 && C % NH == 0, "attention: C a multiple of NH");
  const uint64_t rows = uint64_t(B) * T;
  BRIGADE_EXPECT_BYTES(qkv, stored_bytes(rows * 3 * C, format), "attention qkv");
  BRIGADE_EXPECT_BYTES(y, stored_bytes(rows * C, format), "attention y");
  BRIGADE_EXPECT_FLOATS(lse, rows * NH, "attention lse");
  BRIGADE_EXPECT(qkv.offset % 16 == 0, "attention on matrix tiles: qkv on 16 bytes");
}

}  // namespace

void attention_tiles_forward(vk::Commands& cmd, const AttentionTiling& t, vk::View qkv, vk::View y, vk::View lse,
                             uint32_t B, uint32_t T, uint32_t C, uint32_t NH, Precision format) {
  expect_views(qkv, y, lse, B, T, C, NH, format);
  if (B == 0 || T == 0) return;
  dispatch(cmd, t, TilesPass::Forward, {qkv, y, lse}, B, T, C, NH, format);
}

void attention_tiles_backward(vk::Commands& cmd, const AttentionTiling& t, vk::View qkv, vk::View y, vk::View lse,
                              vk::View dy, vk::View dqkv, vk::View delta, uint32_t B, uint32_t T, uint32_t C,
                              uint32_t NH, Precision format, std::optional<vk::View> copy, std::optional<TilesPass> only) {
  expect_views(qkv, y, lse, B, T, C, NH, format);
  BRIGADE_EXPECT(only != TilesPass::Forward, "the backward's passes are the queries' and the keys' and values'");
  const uint64_t rows = uint64_t(B) * T;
  BRIGADE_EXPECT_FLOATS(dy, rows * C, "attention dy");
  BRIGADE_EXPECT_FLOATS(dqkv, rows * 3 * C, "attention dqkv");
  BRIGADE_EXPECT_FLOATS(delta, rows * NH, "attention delta");
  BRIGADE_EXPECT(dy.offset % 16 == 0, "attention on matrix tiles: dy on 16 bytes");
  if (copy) BRIGADE_EXPECT_BYTES(*copy, stored_bytes(rows * 3 * C, format), "attention's packed dqkv");
  if (B == 0 || T == 0) return;
  const vk::View to = copy.value_or(dqkv);  // without a copy, bound and never written
  if (only != TilesPass::KeyValue)
    dispatch(cmd, t, TilesPass::Query, {qkv, y, lse, dy, dqkv, delta, to}, B, T, C, NH, format, copy.has_value());
  if (only != TilesPass::Query)
    dispatch(cmd, t, TilesPass::KeyValue, {qkv, lse, dy, dqkv, delta, to}, B, T, C, NH, format, copy.has_value());
}

}  // namespace brigade::ops
