#include "ops/matmul_split.h"

#include <algorithm>
#include <string>

#include "ops/matmul_tiles.h"
#include "shaders/push.h"
#include "util/env.h"
#include "util/error.h"
#include "vk/kernel.h"

namespace brigade::ops {
namespace {

constexpr uint64_t kWorkspaceBytes = uint64_t(32) << 20;
constexpr uint64_t kEnoughBlocks = 256;  // as the tilings' choice of their largest block
constexpr uint32_t kMostParts = 16;
constexpr uint32_t kLeastDepth = 1024;  // of K a part
constexpr uint32_t kLarge = 1u << 15;   // a product's side that takes the largest block

// BRIGADE_SPLIT_K, read once: auto (the default) splits where a device keeps a workspace, off
// nowhere (the other half of a measurement: tools/gpu-check.sh's split part).
bool split_off() {
  static const bool off = env_choice("BRIGADE_SPLIT_K", {"auto", "off"}) == "off";
  return off;
}

uint32_t block_rows(const MatmulTiling& t) { return t.wg_y * t.tm * (t.variant == MatmulTiling::Variant::Matrix ? t.lm : 1); }
uint32_t block_cols(const MatmulTiling& t) { return t.wg_x * t.tn * (t.variant == MatmulTiling::Variant::Matrix ? t.ln : 1); }
uint64_t blocks_of(const MatmulParams& p, const MatmulTiling& t) {
  return uint64_t(vk::groups_for(p.M, block_rows(t))) * vk::groups_for(p.N, block_cols(t));
}

}  // namespace

uint64_t matmul_workspace_bytes(const vk::PhysicalInfo& device) {
  // BRIGADE_SPLIT_K first, so a word it does not take is refused on any device.
  return split_off() || device.type == VK_PHYSICAL_DEVICE_TYPE_CPU ? 0 : kWorkspaceBytes;
}

bool splits_k(const MatmulParams& p) {
  using P = MatmulParams;
  return p.batch == 1 && p.terms == 1 && p.heads == 1 && p.epilogue == P::Epilogue::None &&
         p.causal == P::Causal::None && p.c_format == Precision::Fp32 && p.c_round == Precision::Fp32 &&
         p.copy_format == Precision::Fp32 && p.offset_c == 0 && p.ld_c() == p.N && p.k_chunk == 0 &&
         uint64_t(p.M) * p.N <= uint64_t(65535) * BRIGADE_WG_1D;
}

MatmulTiling split_tiling(const vk::PhysicalInfo& device, const MatmulTiling& t, const MatmulParams& p,
                          uint64_t workspace_bytes) {
  using V = MatmulTiling::Variant;
  if (t.variant == V::Registers || t.feed != MatmulTiling::Feed::Staged || !splits_k(p) || !workspace_bytes) return t;
  MatmulTiling big = t.variant == V::Matrix ? default_matrix_tiling(device, p.a_format, kLarge, kLarge).value_or(t)
                                            : matmul_tiling(device, kLarge, kLarge);
  if (big.variant != t.variant) return t;
  const uint64_t blocks = blocks_of(p, big);
  const uint64_t part_bytes = uint64_t(p.M) * p.N * 4;
  uint32_t parts = 1;
  while (blocks * parts < kEnoughBlocks && parts < kMostParts && p.K >= uint64_t(2) * parts * kLeastDepth &&
         2 * parts * part_bytes <= workspace_bytes)
    parts *= 2;
  if (parts == 1) return t;
  // On matrix units, blocks half as wide that make enough whole go before a split K: on an H200
  // gpt2-small's MLP weight gradients (768x3072 and 3072x768, K 16384: 144 large blocks) took
  // 0.573 and 0.575 ms in 128x64 blocks against 0.743 and 0.736 in the large ones with K in 2
  // parts (docs/BENCHMARKS.md, "The H200 a fifth time").
  if (big.variant == V::Matrix && big.tn % 2 == 0) {
    MatmulTiling narrow = big;
    narrow.tn /= 2;
    if (blocks_of(p, narrow) >= kEnoughBlocks) return narrow;
  }
  big.k_parts = parts;
  return big;
}

void matmul_split(vk::Commands& cmd, vk::View a, vk::View b, vk::View c, const MatmulParams& p,
                  const MatmulTiling& t) {
  BRIGADE_EXPECT(t.variant != MatmulTiling::Variant::Registers && t.feed == MatmulTiling::Feed::Staged,
                 "tiling " + t.name() + ": only the staged kernels split K");
  BRIGADE_EXPECT(splits_k(p) && p.K > 0, "a split product is one product of a plain fp32 C over a K of at least 1");
  // Parts of whole staged tiles, 8 deep at least (a 16-bit run of A along K starts on 16 bytes).
  const uint32_t depth = std::max(t.bk, 8u);
  const uint32_t chunk = (p.K + t.k_parts - 1) / t.k_parts;
  const uint32_t k_chunk = (chunk + depth - 1) / depth * depth;
  const uint32_t parts = (p.K + k_chunk - 1) / k_chunk;
  const uint64_t part = uint64_t(p.M) * p.N;
  const std::optional<vk::View>& w = cmd.workspace();
  BRIGADE_EXPECT(w && w->range >= parts * part * 4,
                 "a product split in " + std::to_string(parts) + " parts needs " + std::to_string(parts * part * 4) +
                     " bytes of workspace; the recording has " + std::to_string(w ? w->range : 0));
  MatmulParams q = p;
  MatmulTiling one = t;
  one.k_parts = 1;
  q.tiling = one, q.k_chunk = k_chunk, q.batch = parts, q.accumulate = false;
  q.stride_a = q.stride_b = 0, q.stride_c = uint32_t(part);
  const vk::View partials(*w->buffer, w->offset, parts * part * 4), out(*c.buffer, c.offset, part * 4);
  matmul(cmd, a, b, partials, q);
  if (!p.accumulate) cmd.fill(out);
  // The parts added to C in order, in one dispatch (shaders/axpy.comp).
  const shaders::AxpyPush push{uint32_t(part), 1.0f, parts, uint32_t(part)};
  cmd.dispatch(cmd.device().kernel("axpy"), {partials, out}, push, {vk::groups_for(uint32_t(part), BRIGADE_WG_1D)});
}

}  // namespace brigade::ops
