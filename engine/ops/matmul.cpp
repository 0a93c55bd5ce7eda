#include "ops/matmul.h"

#include <algorithm>
#include <iterator>
#include <numeric>

#include "ops/launch_geometry.h"
#include "ops/matmul_split.h"
#include "ops/matmul_tiles.h"
#include "ops/product_capture.h"
#include "ops/tuned_tilings.h"
#include "shaders/matmul.h"
#include "util/error.h"
#include "vk/commands.h"
#include "vk/kernel.h"

namespace brigade::ops {
namespace {

// Broken calls are bugs in the caller, not something a user can fix: BRIGADE_EXPECT names
// file:line and builds its message only when the check fails.

std::string dims(uint64_t rows, uint64_t cols) {
  return "(" + std::to_string(rows) + "," + std::to_string(cols) + ")";
}

// How an operand's matrices lie in its buffer: matrix i at offset + (i / heads) * stride +
// (i % heads) * head_stride (shaders/matmul.h).
struct Grid {
  uint32_t offset, stride, heads = 1, head_stride = 0;
};

// Elements a batch of stored (rows, cols) matrices spans in its buffer, from its offset (the
// batch whole rows of heads).
uint64_t span_elements(uint64_t batch, const Grid& g, uint32_t rows, uint32_t cols, uint32_t ld) {
  if (rows == 0 || cols == 0) return 0;
  return (batch / g.heads - 1) * g.stride + uint64_t(g.heads - 1) * g.head_stride +
         uint64_t(rows - 1) * ld + cols;
}

// The bytes of `v` the operand spans, checked against its range.
uint64_t check_operand(const char* name, vk::View v, uint64_t batch, const Grid& g,
                       uint32_t rows, uint32_t cols, uint32_t ld, Precision format = Precision::Fp32) {
  BRIGADE_EXPECT(ld >= cols, std::string(name) + ": leading dimension " + std::to_string(ld) +
                         " is less than the stored row length " + std::to_string(cols));
  const uint64_t elements = g.offset + span_elements(batch, g, rows, cols, ld);
  const uint64_t need = stored_bytes(elements, format);
  BRIGADE_EXPECT(elements <= UINT32_MAX, std::string(name) + ": spans more than 2^32 elements");
  BRIGADE_EXPECT(v.range >= need, std::string(name) + ": view of '" + v.buffer->name() + "' holds " +
                              std::to_string(v.range) + " bytes, a batch of " +
                              std::to_string(batch) + " stored " + dims(rows, cols) +
                              " matrices needs " + std::to_string(need));
  return need;
}

// vec4 loads of an operand are valid when every stored row starts 16-byte aligned and, where
// the loads run across the output block (along M or N), that extent is a multiple of 4, so a
// load is either wholly inside the matrix or wholly clamped. The kernel walks K in chunks of
// 4 and takes a K that is no multiple of 4 with a tail of single steps (K_TAIL).
// A 16-bit operand's quads are word pairs: 8-byte aligned. `run`: the elements one wide load
// takes (4; the matrix-unit kernel stages 16-bit runs of 8, 16 bytes), so row starts, offsets
// and strides are its multiples.
bool vec4_ok(vk::View v, const Grid& g, uint32_t ld, uint64_t matrices, bool along_block,
             uint32_t block_extent, uint32_t per_invocation, Precision format = Precision::Fp32, uint32_t run = 4) {
  if (v.offset % (run * (is_half(format) ? 2 : 4)) || g.offset % run || ld % run) return false;
  if (matrices > 1 && (g.stride % run || g.head_stride % run)) return false;
  return !along_block || (block_extent % 4 == 0 && per_invocation % 4 == 0);
}

// Blocks of C a workgroup computes, along M and along N.
uint32_t rows_of_block(const MatmulTiling& t) { return t.wg_y * t.tm * (t.variant == MatmulTiling::Variant::Matrix ? t.lm : 1); }
uint32_t cols_of_block(const MatmulTiling& t) { return t.wg_x * t.tn * (t.variant == MatmulTiling::Variant::Matrix ? t.ln : 1); }

// Chunk `step` of C's rows or columns (whole blocks) as much of a dispatch's grid as `most`
// workgroups hold, and where a bias runs along them, a view of it at a valid offset.
uint64_t chunk_step(const vk::Device& dev, uint32_t block, uint64_t most, bool bias_along) {
  uint64_t step = block;
  if (bias_along) {
    const uint64_t align = std::max<uint64_t>(dev.info().min_storage_offset_alignment, 1);
    const uint64_t floats = align / std::gcd<uint64_t>(align, 4);
    step = step / std::gcd<uint64_t>(step, floats) * floats;
  }
  return uint64_t(block) * most / step * step;
}

// The most workgroups a dispatch on `dev` takes along dimension `d`: the device's own count
// (2^31 - 1 along x on many GPUs), or less where a test lowered it.
uint64_t grid_limit(const vk::Device& dev, int d) {
  const uint32_t lowered = vk::lowered_grid().load(std::memory_order_relaxed);
  const uint32_t own = dev.info().max_workgroup_count[d];
  return lowered ? std::min(lowered, own) : own;
}

// A product whose blocks of C are more than a dispatch's grid holds along M or along N, as
// products of chunks of C's rows (then of its columns) that fit: A's rows (or B's columns), C,
// the epilogue's tensor and C's copy read at offsets, the bias as a view where it runs along
// them. Every chunk's C is what the whole product computes there.
void matmul_chunked(vk::Commands& cmd, vk::View a, vk::View b, vk::View c, const MatmulParams& p, MatmulTiling t,
                    std::optional<vk::View> bias, std::optional<vk::View> epilogue, std::optional<vk::View> copy) {
  const vk::Device& dev = cmd.device();
  const bool by_rows = vk::groups_for(p.M, rows_of_block(t)) > grid_limit(dev, 1);
  const uint64_t step = by_rows ? chunk_step(dev, rows_of_block(t), grid_limit(dev, 1), bias && p.bias_rows)
                                : chunk_step(dev, cols_of_block(t), grid_limit(dev, 0), bias && !p.bias_rows);
  const std::string shape = std::to_string(p.M) + "x" + std::to_string(p.N);
  if (p.causal != MatmulParams::Causal::None || step == 0)
    throw UserError("a matrix product of " + shape + " outputs is over what a dispatch's grid of " + dev.label() +
                    " holds in blocks of " + std::to_string(rows_of_block(t)) + "x" + std::to_string(cols_of_block(t)) +
                    (p.causal != MatmulParams::Causal::None ? " and, causal, cannot be cut" : " with its bias cut at valid offsets") +
                    "; use more micro-batches so each is smaller");
  t.k_parts = 1;  // a split K is for products of few blocks
  MatmulParams q = p;
  q.tiling = t, q.lda = p.ld_a(), q.ldb = p.ld_b(), q.ldc = p.ld_c();
  const uint32_t total = by_rows ? p.M : p.N;
  // A capture (`bench products`) took the product whole; its chunks go to one kept by nobody.
  std::optional<ProductCapture> chunks;
  if (ProductCapture::active()) chunks.emplace();
  for (uint32_t at = 0; at < total; at += uint32_t(step)) {
    const uint32_t n = uint32_t(std::min<uint64_t>(step, total - at));
    std::optional<vk::View> part_bias = bias;
    if (by_rows) {
      q.M = n, q.offset_a = p.offset_a + (p.trans_a ? at : at * q.lda), q.offset_c = p.offset_c + at * q.ldc;
      if (bias && p.bias_rows) part_bias = vk::View(*bias->buffer, bias->offset + uint64_t(at) * 4, uint64_t(n) * 4);
    } else {
      q.N = n, q.offset_b = p.offset_b + (p.trans_b ? at * q.ldb : at), q.offset_c = p.offset_c + at;
      if (bias && !p.bias_rows) part_bias = vk::View(*bias->buffer, bias->offset + uint64_t(at) * 4, uint64_t(n) * 4);
    }
    matmul(cmd, a, b, c, q, part_bias, epilogue, copy);
  }
}

}  // namespace

std::string MatmulTiling::name() const {
  const std::string parts = (group > 1 ? ", blocks in groups of " + std::to_string(group) + " rows" : "") +
                            (k_parts > 1 ? ", K in " + std::to_string(k_parts) + " parts" : "");
  if (variant == Variant::Matrix)
    return std::string(emulated ? "matrix tiles on plain invocations " : "matrix units ") + std::to_string(lm) + "x" +
           std::to_string(ln) + "x" + std::to_string(lk) + ", " + std::to_string(tm) + "x" + std::to_string(tn) +
           " per warp of " + std::to_string(subgroup) + ", " + std::to_string(wg_y) + "x" + std::to_string(wg_x) +
           " warps, k-depth " + std::to_string(bk) + (stages == 2 ? ", double-buffered" : "") +
           (ahead == 2 ? ", two tiles ahead" : "") +
           (feed == Feed::StageOnce ? ", one tile staged (a ceiling)"
            : feed == Feed::Direct  ? ", fragments from memory (no staging)"
                                    : "") + parts;
  const std::string block = std::to_string(tm) + "x" + std::to_string(tn) + " per invocation, " +
                            std::to_string(wg_y) + "x" + std::to_string(wg_x) + " invocations";
  if (variant == Variant::Shared) return "shared " + block + ", k-depth " + std::to_string(bk) + parts;
  return "registers " + block +
         (subgroup ? ", A shared by subgroups of " + std::to_string(subgroup) : "");
}

uint32_t MatmulTiling::shared_bytes() const {
  if (variant == Variant::Matrix) {  // shaders/matmul_tiles.comp: A's and B's tiles, then C's matrices
    // 16-bit elements, the tiles laid out as A and B are stored: the larger of either layout.
    const uint32_t bm = wg_y * tm * lm, bn = wg_x * tn * ln, pad = BRIGADE_TILES_PAD;
    return 2 * stages * (std::max(bm * (bk + pad), bk * (bm + pad)) + std::max(bk * (bn + pad), bn * (bk + pad))) +
           4 * wg_x * wg_y * lm * ln;
  }
  if (variant != Variant::Shared) return 0;
  return 2 * bk * (wg_y * tm / 4 + 1 + wg_x * tn / 4 + 1) * 16;  // shaders/matmul_shared.comp: two of each tile
}

MatmulTiling default_tiling(const vk::PhysicalInfo& device, const MatmulParams& p, bool extras, uint64_t workspace_bytes) {
  std::optional<MatmulTiling> matrix;
  // A product with GELU's gradient in its epilogue keeps the small blocks however many it has:
  // on an H200 gpt2-small's MLP input gradient (16384x3072x768, C also copied to bf16) took
  // 0.671 ms in them against 0.858 in the large double-buffered ones, 0.78x timed again alone
  // (docs/BENCHMARKS.md, "The H200 a fifth time").
  const bool gelu_grad = p.epilogue == MatmulParams::Epilogue::GeluGrad;
  if (is_half(p.a_format) && p.b_format == p.a_format)
    matrix = default_matrix_tiling(device, p.a_format, gelu_grad ? 0 : p.M, gelu_grad ? 0 : p.N);
  const MatmulTiling t = matrix ? *matrix : matmul_tiling(device, p.M, p.N);
  return extras || !workspace_bytes ? t : split_tiling(device, t, p, workspace_bytes);
}

namespace {

// The products one call names: one for a part of a split K, else every matrix of the batch's terms.
uint64_t products_named(const MatmulParams& p) { return p.k_chunk ? 1 : uint64_t(p.batch) * p.terms; }

}  // namespace

std::string product_name(const MatmulParams& p) {
  const uint64_t count = products_named(p);
  return std::to_string(p.M) + "x" + std::to_string(p.N) + "x" + std::to_string(p.K) + (p.trans_a ? " A^T" : "") +
         (p.trans_b ? " B^T" : "") + (count > 1 ? " x" + std::to_string(count) : "") +
         (p.k_chunk ? " in " + std::to_string(p.batch) + " parts of K" : "") +
         (p.causal != MatmulParams::Causal::None ? " causal" : "");
}

double product_flops(const MatmulParams& p) { return 2.0 * p.M * p.N * p.K * double(products_named(p)); }

bool MatmulTiling::stores_pairs() const { return variant == Variant::Matrix ? ln % 2 == 0 : tn % 2 == 0; }

bool matmul_stores_half(const vk::PhysicalInfo& device, uint32_t N) {
  return matmul_tiling(device).stores_pairs() && N % 2 == 0;
}

MatmulTiling matmul_tiling(const vk::PhysicalInfo& device, uint32_t rows, uint32_t cols) {
  if (device.type == VK_PHYSICAL_DEVICE_TYPE_CPU) {
    // Measured on lavapipe (docs/BENCHMARKS.md): 32x4 outputs per invocation with A shared
    // through subgroup broadcasts beat 16x8 (the same 128 accumulators, fewer loads per
    // multiply-add: B's are each lane's own, A's are shared), which beat 8x8 without sharing.
    // One row of lanes fills a subgroup.
    MatmulTiling t{MatmulTiling::Variant::Registers, 8, 8, 32, 4, 16, 0};
    const uint32_t sg = device.subgroup_size;
    if (device.specialize_on_host) {
      // SwiftShader, its fp32 products' constants folded on the host (vk::Specialization::fold):
      // 8x4 without subgroups ran 512^3 at 4.9 GFLOPS against 5.3 for 16x8 and 3.0 for 32x4,
      // and its pipeline is created in 0.13 s against 1.3 and 1.8 (docs/DRIVERS.md).
      t.tm = 8, t.tn = 4;
    } else if (sg && sg <= 64 && (sg & (sg - 1)) == 0) {
      t.wg_x = std::max(8u, sg);
      t.wg_y = std::max(1u, 64 / t.wg_x);
      t.subgroup = sg;
      if (!sharing_subgroup_size(device, t)) t.subgroup = 0;
    }
    // Rows of invocations: fewer only where that computes a sixteenth fewer rows past M, so
    // a workgroup never covers many rows it throws away: M = 288 (Conv2d's backward-data)
    // takes 6 rows of 16, not 3 workgroups of 128 rows (a quarter of them wasted).
    // The same rule picks 16x8 blocks over 32x4 where that computes a sixteenth fewer rows
    // (M = 10, a weight gradient of ten outputs, computes 16 rows, not 32).
    if (rows) {
      const uint32_t most = t.wg_y, tm = t.tm, tn = t.tn;
      uint64_t best = UINT64_MAX;
      for (uint32_t shape_tm : {tm, tm / 2})
        for (uint32_t wy = most; wy >= 1; --wy) {
          const uint64_t block = uint64_t(wy) * shape_tm, computed = (rows + block - 1) / block * block;
          if (computed + computed / 16 < best) best = computed, t.wg_y = wy, t.tm = shape_tm, t.tn = tn * tm / shape_tm;
        }
    }
    // Columns per invocation by the same rule, down to 4 (what vec4 loads of B need): a
    // head of 32 channels, or fashion-cnn's 196 pixels (224 computed instead of 256).
    if (cols) {
      uint64_t best = UINT64_MAX;
      for (uint32_t tn = t.tn; tn >= 4 && tn % 4 == 0; tn /= 2) {
        const uint64_t block = uint64_t(t.wg_x) * tn, computed = (cols + block - 1) / block * block;
        if (computed + computed / 16 < best) best = computed, t.tn = tn;
      }
    }
    return t;
  }
  // GPUs: shared-memory tiles (shaders/matmul_shared.comp). The largest block of which the
  // problem has enough, so every compute unit gets several: 64x128 (8x16 invocations of 8x8
  // outputs staged 8 deep) where it has 256, 64x64 (16x16 of 4x4) where it has 128, else
  // 32x32 (8x8 of 4x4); one that does not fit the device is passed over, and a device that
  // fits none keeps register blocking. On an H200 (BENCHMARKS.md, "On a GPU"), 64x128 ran
  // 2048^3 and 4096^3 1.19x faster than 128x128 did, and 64x64 ran 1024^3 1.42x faster than
  // 64x128 (128 of them there).
  using V = MatmulTiling::Variant;
  const MatmulTiling blocks[] = {{V::Shared, 16, 8, 8, 8, 8}, {V::Shared, 16, 16, 4, 4, 16}, {V::Shared, 8, 8, 4, 4, 16}};
  const uint64_t enough[] = {256, 128, 0};
  const MatmulTiling* fits = nullptr;
  for (size_t i = 0; i < std::size(blocks); ++i) {
    const MatmulTiling& b = blocks[i];
    if (b.shared_bytes() > device.max_shared_memory || b.wg_x * b.wg_y > device.max_workgroup_invocations) continue;
    fits = &b;
    const uint64_t many = uint64_t(vk::groups_for(rows, b.wg_y * b.tm)) * vk::groups_for(cols, b.wg_x * b.tn);
    if (!rows || !cols || many >= enough[i]) break;
  }
  return fits ? *fits : MatmulTiling{};
}

std::optional<uint32_t> sharing_subgroup_size(const vk::PhysicalInfo& device, const MatmulTiling& t) {
  if (t.variant != MatmulTiling::Variant::Registers || !t.subgroup) return 0u;
  const std::vector<uint32_t> sizes = vk::subgroup_sizes(device);
  if (device.subgroup_size_control && device.full_subgroups && std::count(sizes.begin(), sizes.end(), t.subgroup))
    return t.subgroup;
  // A size the device never runs: the kernel's own check (gl_SubgroupSize) takes plain loads.
  if (device.min_subgroup_size == device.max_subgroup_size || t.subgroup < device.min_subgroup_size ||
      t.subgroup > device.max_subgroup_size)
    return 0u;
  return std::nullopt;
}

void matmul(vk::Commands& cmd, vk::View a, vk::View b, vk::View c, const MatmulParams& p,
            std::optional<vk::View> bias, std::optional<vk::View> epilogue, std::optional<vk::View> copy) {
  if (p.M == 0 || p.N == 0 || p.batch == 0 || (p.K == 0 && p.accumulate)) return;
  vk::Device& dev = cmd.device();
  const bool extras = bias || epilogue || copy;
  BRIGADE_EXPECT(p.batch <= 65535, "batch " + std::to_string(p.batch) + " is over 65535 workgroups");
  BRIGADE_EXPECT((p.batch <= p.heads || p.stride_c != 0) && (p.heads == 1 || p.head_stride_c != 0),
                 "batched C needs a non-zero stride");
  BRIGADE_EXPECT(p.terms >= 1, "a matmul sums at least one product");

  const uint32_t lda = p.ld_a(), ldb = p.ld_b(), ldc = p.ld_c();
  const uint64_t products = uint64_t(p.batch) * p.terms;
  BRIGADE_EXPECT(p.heads >= 1 && p.batch % p.heads == 0 && products % p.heads == 0,
                 "a grid of " + std::to_string(p.heads) + " heads needs a batch of whole rows of heads");
  const Grid ga{p.offset_a, p.stride_a, p.heads, p.head_stride_a},
      gb{p.offset_b, p.stride_b, p.heads, p.head_stride_b},
      gc{p.offset_c, p.stride_c, p.heads, p.head_stride_c};
  const uint64_t a_bytes = check_operand("A", a, products, ga, p.trans_a ? p.K : p.M, p.trans_a ? p.M : p.K, lda, p.a_format);
  const uint64_t b_bytes = check_operand("B", b, products, gb, p.trans_b ? p.N : p.K, p.trans_b ? p.K : p.N, ldb, p.b_format);
  const uint64_t c_bytes = check_operand("C", c, p.batch, gc, p.M, p.N, ldc, p.c_format);
  const uint32_t bias_size = p.bias_rows ? p.M : p.N;
  const uint64_t bias_bytes = bias ? check_operand("bias", *bias, 1, Grid{0, 0}, 1, bias_size, bias_size) : 0;
  using Epilogue = MatmulParams::Epilogue;
  const bool has_tensor = p.epilogue == Epilogue::Gelu || p.epilogue == Epilogue::GeluGrad;
  BRIGADE_EXPECT(has_tensor == bool(epilogue), "an epilogue and its tensor come together");
  BRIGADE_EXPECT((p.epilogue != Epilogue::Gelu && p.epilogue != Epilogue::Relu) || !p.accumulate,
                 "a GELU or ReLU epilogue applies to the whole of C, so C cannot accumulate");
  const uint64_t e_bytes = epilogue ? check_operand("epilogue tensor", *epilogue, p.batch, gc, p.M, p.N, ldc, p.e_format) : 0;
  BRIGADE_EXPECT(p.epilogue == Epilogue::Gelu ? p.e_format == p.c_format
                                              : p.epilogue == Epilogue::GeluGrad || p.e_format == Precision::Fp32,
                 "a GELU epilogue stores its activation as C; only a GELU gradient reads a 16-bit tensor");
  BRIGADE_EXPECT(is_half(p.copy_format) == bool(copy), "C's copy and its 16-bit format come together");
  BRIGADE_EXPECT(!copy || (p.c_format == Precision::Fp32 && p.epilogue != Epilogue::Gelu),
                 "C's 16-bit copy is of an fp32 C, and not beside a GELU epilogue's activation");
  const uint64_t copy_bytes = copy ? check_operand("C's copy", *copy, p.batch, gc, p.M, p.N, ldc, p.copy_format) : 0;
  using Causal = MatmulParams::Causal;
  BRIGADE_EXPECT(p.causal == Causal::None || (p.causal == Causal::SkipAbove ? p.M == p.N : p.M == p.K),
                 "a causal product is square along its diagonal");

  // The tiling: the caller's, else the device's tuned one for this product (ops/tuned_tilings.h),
  // else the default; the product and the tiling it took go to a capture (`bench products`).
  ProductCapture* capture = p.k_chunk ? nullptr : ProductCapture::active();
  const bool tuned = !p.tiling && !p.k_chunk && any_tuned();
  std::optional<CapturedProduct> seen;
  if (capture || tuned) {
    auto at = [](vk::View v, uint64_t bytes) { return CapturedOperand{v.offset % 256, bytes}; };
    auto at_if = [&](const std::optional<vk::View>& v, uint64_t bytes) {
      return v ? std::optional(at(*v, bytes)) : std::nullopt;
    };
    seen = CapturedProduct{p, at(a, a_bytes), at(b, b_bytes), at(c, c_bytes), at_if(bias, bias_bytes),
                           at_if(epilogue, e_bytes), at_if(copy, copy_bytes), {}};
  }
  const uint64_t workspace = cmd.workspace() ? cmd.workspace()->range : 0;
  MatmulTiling t = p.tiling ? *p.tiling : default_tiling(dev.info(), p, extras, workspace);
  const std::optional<MatmulTiling> tuned_one = tuned ? tuned_tiling(dev.info(), *seen, t, workspace) : std::nullopt;
  if (tuned_one) t = *tuned_one;
  if (capture) {
    seen->tiling = t;
    capture->add(std::move(*seen));
  }
  BRIGADE_EXPECT(t.tm && t.tn && t.wg_x && t.wg_y && t.bk, "tiling " + t.name() + " has a zero size");
  BRIGADE_EXPECT(t.wg_x * t.wg_y <= dev.info().max_workgroup_invocations,
         "tiling " + t.name() + " has more invocations than the device allows");
  BRIGADE_EXPECT(t.shared_bytes() <= dev.info().max_shared_memory,
         "tiling " + t.name() + " needs more shared memory than the device has");
  BRIGADE_EXPECT(t.variant != MatmulTiling::Variant::Registers || !t.subgroup || (t.wg_x % t.subgroup == 0 && t.tm % 4 == 0),
         "tiling " + t.name() + " shares A by subgroups, which needs wg_x % subgroup == 0 and tm % 4 == 0");
  const std::optional<uint32_t> sharing = sharing_subgroup_size(dev.info(), t);
  BRIGADE_EXPECT(sharing.has_value(), "tiling " + t.name() + ": " + dev.info().name + " runs subgroups of " +
                                          std::to_string(dev.info().min_subgroup_size) + " to " +
                                          std::to_string(dev.info().max_subgroup_size) +
                                          " and cannot require full ones of one size, which sharing A needs");
  BRIGADE_EXPECT(t.variant != MatmulTiling::Variant::Shared || (t.tm % 4 == 0 && t.tn % 4 == 0 && t.bk % 4 == 0),
                 "tiling " + t.name() + ": shared tiles need outputs per invocation and a k-depth in multiples of 4");
  if (vk::groups_for(p.M, rows_of_block(t)) > grid_limit(dev, 1) || vk::groups_for(p.N, cols_of_block(t)) > grid_limit(dev, 0))
    return matmul_chunked(cmd, a, b, c, p, t, bias, epilogue, copy);
  // Vec4 loads: the register blocks need whole quads across their rows and columns too; the
  // kernels that stage tiles (shared, matrix) load a run that crosses an edge one element at
  // a time (the matrix kernel's runs are 8 elements).
  const bool regs = t.variant == MatmulTiling::Variant::Registers;
  const uint32_t run = t.variant == MatmulTiling::Variant::Matrix ? 8 : 4;
  const bool vec4_a = vec4_ok(a, ga, lda, products, regs && p.trans_a, p.M, t.tm, p.a_format, run);
  const bool vec4_b = vec4_ok(b, gb, ldb, products, regs && !p.trans_b, p.N, t.tn, p.b_format, run);
  // C's rows as vec4s: whole quads inside N, every row and batch matrix 16-byte aligned, and
  // the bias and the epilogue's tensor (laid out as C) aligned with it.
  const bool vec4_c = t.tn % 4 == 0 && p.N % 4 == 0 &&
                      vec4_ok(c, gc, ldc, p.batch, false, 0, 0, p.c_format) &&
                      (!bias || p.bias_rows || bias->offset % 16 == 0) &&
                      (!epilogue || epilogue->offset % 16 == 0) && (!copy || copy->offset % 8 == 0);
  // A 16-bit C is stored a whole quad, or an even pair of a row, at a time: two invocations
  // never share a word.
  const bool pairs_c = t.stores_pairs() && p.N % 2 == 0 && ldc % 2 == 0 && gc.offset % 2 == 0 &&
                       c.offset % 4 == 0 && (!copy || copy->offset % 4 == 0) &&
                       (p.batch == 1 || (gc.stride % 2 == 0 && gc.head_stride % 2 == 0));
  BRIGADE_EXPECT(!is_half(p.c_format) || ((vec4_c || pairs_c) && !p.accumulate),
                 "a 16-bit C needs even pairs of a row in one invocation (an even block width, even N, "
                 "row starts and matrices) and no accumulation");
  BRIGADE_EXPECT(!copy || vec4_c || pairs_c,
                 "C's 16-bit copy needs even pairs of a row in one invocation (an even block width, even N, "
                 "row starts and matrices)");
  BRIGADE_EXPECT(p.c_round == Precision::Fp32 || !is_half(p.c_format), "C is either rounded in fp32 or stored in 16 bits");
  BRIGADE_EXPECT(t.k_parts == 1 || !extras, "a split product adds no bias and writes no copy of C");
  if (t.k_parts > 1) return matmul_split(cmd, a, b, c, p, t);
  BRIGADE_EXPECT(!p.k_chunk || (!regs && t.feed == MatmulTiling::Feed::Staged && p.k_chunk % t.bk == 0),
                 "tiling " + t.name() + ": a part of a split K is whole tiles of the staged kernels");
  vk::Specialization spec;
  spec.set(BRIGADE_MATMUL_SPEC_TRANS_A, p.trans_a)
      .set(BRIGADE_MATMUL_SPEC_TRANS_B, p.trans_b)
      .set(BRIGADE_MATMUL_SPEC_EPILOGUE, uint32_t(p.epilogue))
      .set(BRIGADE_MATMUL_SPEC_FORMAT_A, uint32_t(p.a_format))
      .set(BRIGADE_MATMUL_SPEC_FORMAT_B, uint32_t(p.b_format))
      .set(BRIGADE_MATMUL_SPEC_FORMAT_C, uint32_t(p.c_format))
      .set(BRIGADE_MATMUL_SPEC_ROUND_C, uint32_t(p.c_round))
      .set(BRIGADE_MATMUL_SPEC_FORMAT_E, uint32_t(p.e_format))
      .set(BRIGADE_MATMUL_SPEC_FORMAT_COPY, uint32_t(p.copy_format))
      .set(BRIGADE_MATMUL_SPEC_CAUSAL, uint32_t(p.causal))
      .set(BRIGADE_MATMUL_SPEC_VEC4_A, vec4_a)
      .set(BRIGADE_MATMUL_SPEC_VEC4_B, vec4_b)
      .set(BRIGADE_MATMUL_SPEC_BIAS, !bias         ? BRIGADE_MATMUL_BIAS_NONE
                                     : p.bias_rows ? BRIGADE_MATMUL_BIAS_ROWS
                                                   : BRIGADE_MATMUL_BIAS_COLUMNS);
  if (p.k_chunk) spec.set(BRIGADE_MATMUL_SPEC_K_CHUNK, p.k_chunk);  // unsplit, the constant's default
  BRIGADE_EXPECT(t.group <= 1 || !regs, "tiling " + t.name() + ": blocks in groups of rows are the staged kernels'");
  if (t.group > 1) spec.set(BRIGADE_MATMUL_SPEC_GROUP, t.group);
  const shaders::MatmulPush push{p.M,        p.N,        p.K,        lda,        ldb,
                                 ldc,        p.stride_a, p.stride_b, p.stride_c, p.alpha,
                                 p.accumulate ? 1u : 0u, p.terms, p.offset_a, p.offset_b, p.offset_c,
                                 p.heads,    p.head_stride_a, p.head_stride_b, p.head_stride_c};
  // Unused bindings stand in for what the dispatch already touches the same way, so they add
  // no barrier: A for the read-only ones, C for the written one.
  const bool gelu = p.epilogue == Epilogue::Gelu;
  const vk::View pre = !gelu && epilogue ? *epilogue : a, act = gelu ? *epilogue : copy ? *copy : c;
  if (cmd.marking())  // `bench profile`: each product's shape and rate, and whether its tiling was tuned
    cmd.note_work(product_name(p) + (tuned_one ? " tuned" : ""), product_flops(p));
  if (t.variant == MatmulTiling::Variant::Matrix) {
    matmul_tiles(cmd, t, p, spec, {a, b, bias.value_or(a), c, pre, act}, push);
    return;
  }
  spec.set(BRIGADE_MATMUL_SPEC_WG_X, t.wg_x)
      .set(BRIGADE_MATMUL_SPEC_WG_Y, t.wg_y)
      .set(BRIGADE_MATMUL_SPEC_TM, t.tm)
      .set(BRIGADE_MATMUL_SPEC_TN, t.tn)
      .set(BRIGADE_MATMUL_SPEC_VEC4_C, vec4_c);
  // SwiftShader (vk::Specialization::fold): the register blocks' loops unrolled and their
  // arrays in registers ran fp32 products 5 to 8 times faster there. Not where 16-bit operands
  // are loaded one element at a time, over which its compiler took minutes once unrolled, nor
  // in blocks of more than 32 outputs, which it took 1.3 s or more to create (the default is 8x4).
  spec.fold = regs && t.tm * t.tn <= 32 && ((vec4_a && vec4_b) || (!is_half(p.a_format) && !is_half(p.b_format)));
  spec.subgroup_size = sharing.value_or(0);
  if (regs)
    spec.set(BRIGADE_MATMUL_SPEC_SUBGROUP, t.subgroup)
        .set(BRIGADE_MATMUL_SPEC_K_TAIL, (vec4_a || vec4_b) && p.K % 4 != 0);
  else
    spec.set(BRIGADE_MATMUL_SPEC_BK, t.bk);
  const vk::Groups groups{vk::groups_for(p.N, t.wg_x * t.tn), vk::groups_for(p.M, t.wg_y * t.tm),
                          p.batch};
  const char* kernel = regs ? "matmul" : "matmul_shared";
  cmd.dispatch(dev.kernel(format_kernel(kernel, {p.a_format, p.b_format, p.c_format, p.c_round, p.e_format, p.copy_format}), spec),
               {a, b, bias.value_or(a), c, pre, act}, push, groups);
}

}  // namespace brigade::ops
