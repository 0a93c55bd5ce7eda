#include "ops/matmul_tiles.h"


#include "util/env.h"
#include "util/error.h"
#include "vk/kernel.h"
#include "vk/spirv.h"

namespace brigade::ops {
namespace {

static_assert(uint32_t(MatmulTiling::Feed::StageOnce) == BRIGADE_TILES_FEED_STAGE_ONCE &&
              uint32_t(MatmulTiling::Feed::Direct) == BRIGADE_TILES_FEED_DIRECT);

using Element = vk::MatrixShape::Element;

std::optional<Element> element_of(Precision p) {
  if (p == Precision::Fp16) return Element::Fp16;
  if (p == Precision::Bf16) return Element::Bf16;
  return std::nullopt;
}

// The cooperative-matrix build of the kernel for values of `element`.
std::string coopmat_kernel(Precision element) {
  return std::string("matmul_tiles_coopmat_") + precision_name(element);
}

}  // namespace

bool runs_matrix(const vk::PhysicalInfo& device, Precision element, uint32_t m, uint32_t n, uint32_t k,
                 uint32_t lanes) {
  const std::optional<Element> e = element_of(element);
  bool listed = false;
  for (const vk::MatrixShape& s : device.matrix_units.shapes)
    listed |= e && s.element == *e && s.m == m && s.n == n && s.k == k;
  return listed && device.matrix_units.usable() && lanes == device.matrix_units.lanes;
}

std::optional<MatmulTiling> matrix_tiling(const vk::PhysicalInfo& device, Precision element) {
  const std::optional<Element> e = element_of(element);
  if (!e || !device.matrix_units.lists(*e) || !vk::has_shader(coopmat_kernel(element))) return std::nullopt;
  const vk::MatrixShape* best = nullptr;
  for (const vk::MatrixShape& s : device.matrix_units.shapes) {
    if (s.element != *e || s.m % 8 || s.n % 8 || s.k % 8) continue;  // fragments start on 16 bytes
    const uint64_t size = uint64_t(s.m) * s.n * s.k, best_size = best ? uint64_t(best->m) * best->n * best->k : 0;
    if (!best || size > best_size || (size == best_size && s.m == s.n && best->m != best->n)) best = &s;
  }
  if (!best) return std::nullopt;
  MatmulTiling t{MatmulTiling::Variant::Matrix, 2, 2, 2, 2, 2 * best->k, device.matrix_units.lanes};
  t.lm = best->m, t.ln = best->n, t.lk = best->k;
  if (t.shared_bytes() > device.max_shared_memory || t.wg_x * t.wg_y * t.subgroup > device.max_workgroup_invocations)
    return std::nullopt;
  return t;
}

namespace {

// BRIGADE_MATRIX_UNITS, read once: ops::matmul asks on every 16-bit product it records.
const std::string& matrix_units_mode() {
  static const std::string mode = env_choice("BRIGADE_MATRIX_UNITS", {"auto", "on", "off"});
  return mode;
}

bool takes_matrix_units(const vk::PhysicalInfo& device) {
  const std::string& mode = matrix_units_mode();
  return mode == "on" || (mode == "auto" && device.type != VK_PHYSICAL_DEVICE_TYPE_CPU);
}

}  // namespace

std::optional<MatmulTiling> default_matrix_tiling(const vk::PhysicalInfo& device, Precision element,
                                                  uint32_t rows, uint32_t cols) {
  const std::optional<MatmulTiling> t = takes_matrix_units(device) ? matrix_tiling(device, element) : std::nullopt;
  if (!t || !rows || !cols) return t;
  const MatmulTiling large = large_matrix_block(*t);
  const uint64_t blocks = uint64_t(vk::groups_for(rows, large.wg_y * large.tm * large.lm)) *
                          vk::groups_for(cols, large.wg_x * large.tn * large.ln);
  return blocks >= 256 && large.shared_bytes() <= device.max_shared_memory ? large : t;
}

MatmulTiling large_matrix_block(const MatmulTiling& t) {
  MatmulTiling large = t;
  large.tm = large.tn = 4, large.bk = 2 * t.lk, large.stages = 2;
  return large;
}

MatmulTiling emulated_matrix_tiling(uint32_t lm, uint32_t ln, uint32_t lk, uint32_t lanes) {
  MatmulTiling t{MatmulTiling::Variant::Matrix, 2, 2, 2, 2, 2 * lk, lanes};
  t.lm = lm, t.ln = ln, t.lk = lk, t.emulated = true;
  return t;
}

std::string matrix_path(const vk::PhysicalInfo& device, Precision precision) {
  if (!is_half(precision)) return "fp32 products on the SIMT kernel";
  const std::string type = precision_name(precision);
  if (const auto t = default_matrix_tiling(device, precision))
    return type + " products on matrix units (" + t->name() + ")";
  if (matrix_tiling(device, precision))
    return type + " products on the SIMT kernel in fp32 arithmetic: the device's " + type +
           " matrix products are a CPU's emulation, slower than its SIMT kernel (BRIGADE_MATRIX_UNITS=on takes them)";
  if (device.matrix_units.lists(*element_of(precision)) && !vk::has_shader(coopmat_kernel(precision)))
    return type + " products on the SIMT kernel: the device multiplies " + type +
           " matrices, but this build has no cooperative-matrix kernels (tools/install-glslang.sh)";
  std::string listed;
  for (const vk::MatrixShape& s : device.matrix_units.shapes) listed += (listed.empty() ? "" : ", ") + s.name();
  if (const std::string why = device.matrix_units.unusable_why(); !why.empty())
    return type + " products on the SIMT kernel in fp32 arithmetic: the device lists " + listed +
           ", but " + why;
  return type + " products on the SIMT kernel in fp32 arithmetic: the device lists no " + type +
         " matrix product" + (listed.empty() ? "" : " (it lists " + listed + ")");
}

Precision auto_precision(const vk::PhysicalInfo& device) {
  if (default_matrix_tiling(device, Precision::Bf16)) return Precision::Bf16;
  if (default_matrix_tiling(device, Precision::Fp16)) return Precision::Fp16;
  return Precision::Bf16;
}

void matmul_tiles(vk::Commands& cmd, const MatmulTiling& t, const MatmulParams& p, vk::Specialization spec,
                  const std::array<vk::View, 6>& views, const shaders::MatmulPush& push) {
  const vk::PhysicalInfo& device = cmd.device().info();
  BRIGADE_EXPECT(is_half(p.a_format) && p.b_format == p.a_format,
                 "the matrix-unit kernel multiplies 16-bit A and B of one type");
  BRIGADE_EXPECT(t.lm && t.ln && t.lk && t.subgroup && t.bk % t.lk == 0 && t.lm % 8 == 0 && t.ln % 8 == 0 &&
                     t.lk % 8 == 0,
                 "tiling " + t.name() + ": k-depth a multiple of the matrices' k, matrix sides in multiples of 8 "
                 "(tiles are staged in 16-byte rows)");
  BRIGADE_EXPECT(t.stages == 1 || (t.stages == 2 && t.feed == MatmulTiling::Feed::Staged),
                 "tiling " + t.name() + ": one or two copies of the staged tiles");
  BRIGADE_EXPECT(t.ahead == 1 || (t.ahead == 2 && t.stages == 2),
                 "tiling " + t.name() + ": one K tile in flight, or two with two copies of the staged tiles");
  BRIGADE_EXPECT(!t.emulated || (t.lm * t.ln) % t.subgroup == 0,
                 "tiling " + t.name() + ": the lanes of a warp share each matrix's elements evenly");
  const uint32_t invocations = t.wg_x * t.wg_y * t.subgroup;
  BRIGADE_EXPECT(invocations <= device.max_workgroup_invocations,
                 "tiling " + t.name() + " has more invocations than the device allows");
  if (t.feed == MatmulTiling::Feed::Direct) {
    const uint32_t bm = t.wg_y * t.tm * t.lm, bn = t.wg_x * t.tn * t.ln;
    const auto on16 = [](uint64_t elements) { return elements % 8 == 0; };  // 16 bytes of 16-bit elements
    BRIGADE_EXPECT(!t.emulated && p.M % bm == 0 && p.N % bn == 0 && p.K % t.lk == 0 && on16(p.ld_a()) &&
                       on16(p.ld_b()) && on16(p.offset_a) && on16(p.offset_b) && on16(p.stride_a) &&
                       on16(p.stride_b) && on16(p.head_stride_a) && on16(p.head_stride_b) &&
                       views[0].offset % 16 == 0 && views[1].offset % 16 == 0,
                   "tiling " + t.name() + " loads matrix units' fragments from memory: whole blocks of " +
                       std::to_string(bm) + "x" + std::to_string(bn) + ", K a multiple of " + std::to_string(t.lk) +
                       ", rows and matrices of A and B on 16 bytes");
  }
  std::string kernel = "matmul_tiles";
  if (!t.emulated) {
    BRIGADE_EXPECT(runs_matrix(device, p.a_format, t.lm, t.ln, t.lk, t.subgroup),
                   "tiling " + t.name() + " is not a product " + device.name + " lists for " +
                       precision_name(p.a_format) + " in subgroups of " + std::to_string(device.matrix_units.lanes));
    kernel = coopmat_kernel(p.a_format);
  }
  spec.set(BRIGADE_TILES_SPEC_WG, invocations)
      .set(BRIGADE_TILES_SPEC_LM, t.lm)
      .set(BRIGADE_TILES_SPEC_LN, t.ln)
      .set(BRIGADE_TILES_SPEC_LK, t.lk)
      .set(BRIGADE_TILES_SPEC_TILES_M, t.tm)
      .set(BRIGADE_TILES_SPEC_TILES_N, t.tn)
      .set(BRIGADE_TILES_SPEC_WARPS_M, t.wg_y)
      .set(BRIGADE_TILES_SPEC_WARPS_N, t.wg_x)
      .set(BRIGADE_TILES_SPEC_BK, t.bk)
      .set(BRIGADE_TILES_SPEC_LANES, t.subgroup)
      .set(BRIGADE_TILES_SPEC_FEED, uint32_t(t.feed))
      .set(BRIGADE_TILES_SPEC_STAGES, t.stages)
      .set(BRIGADE_TILES_SPEC_AHEAD, t.ahead);
  const vk::Groups groups{vk::groups_for(p.N, t.wg_x * t.tn * t.ln), vk::groups_for(p.M, t.wg_y * t.tm * t.lm),
                          p.batch};
  cmd.dispatch(cmd.device().kernel(kernel, spec), {views[0], views[1], views[2], views[3], views[4], views[5]},
               push, groups);
}

}  // namespace brigade::ops
