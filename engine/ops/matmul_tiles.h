// The matrix-unit kernel (shaders/matmul_tiles.comp): ops::matmul's product with 16-bit A
// and B on the products a device's matrix units list (VK_KHR_cooperative_matrix), fp32
// accumulators, C and the epilogues stored as matmul.comp stores them. The same source runs
// its tile operations on plain invocations (`emulated`), which is how devices without matrix
// units, and the tests, run every line of it but the cooperative-matrix instructions.
#pragma once

#include <array>
#include <optional>
#include <string>

#include "ops/matmul.h"
#include "shaders/matmul.h"

namespace brigade::ops {

// The matrix units' tiling for products of `element` (fp16 or bf16) values on the device: one
// of the shapes it lists for that type (the largest; 16x16x16 among equals), 2x2 matrices a
// warp and 2x2 warps of the matrix units' width (vk::MatrixUnits::lanes). Nothing where the device lists no such product or
// the cooperative-matrix kernels are not built (tools/install-glslang.sh).
std::optional<MatmulTiling> matrix_tiling(const vk::PhysicalInfo& device, Precision element);

// Whether the device's matrix units run m x k times k x n products of `element` values in
// warps of `lanes`: a shape it lists, usable, in warps of the width its kernels run in.
bool runs_matrix(const vk::PhysicalInfo& device, Precision element, uint32_t m, uint32_t n, uint32_t k,
                 uint32_t lanes);

// What ops::matmul takes by default: matrix_tiling where the device takes its matrix units
// by default. BRIGADE_MATRIX_UNITS=auto (the default) takes them on every device but CPUs,
// whose matrix units are an emulation slower than their SIMT kernel (Mesa 26's lavapipe:
// docs/BENCHMARKS.md, "Matrix units on a CPU"); on takes them wherever listed, off nowhere.
// With `rows` and `cols` (a product's M and N), blocks of 4x4 matrices a warp staged 2
// matrices deep in two copies (the next K tile staged while this one multiplies) where the
// product has 256 such blocks or more, the 2x2 blocks otherwise. On an H200, bf16 4096^3:
// 195.7 TFLOPS so, 173.4 staged 4 deep in one copy, 145.7 in the 2x2 blocks; 1024^3: the 4x4
// blocks 43 against 79 (docs/BENCHMARKS.md, "The H200 a fourth time").
std::optional<MatmulTiling> default_matrix_tiling(const vk::PhysicalInfo& device, Precision element,
                                                  uint32_t rows = 0, uint32_t cols = 0);

// `t`'s large block: 4x4 matrices a warp, staged two matrices deep in two copies (what
// products of 256 such blocks or more take by default).
MatmulTiling large_matrix_block(const MatmulTiling& t);

// The same kernel on plain invocations: warps of `lanes` invocations, matrices of lm x ln x lk.
MatmulTiling emulated_matrix_tiling(uint32_t lm = 16, uint32_t ln = 16, uint32_t lk = 16, uint32_t lanes = 32);

// Which kernel a stage in `precision` runs its products on there, and why (`plan`'s line).
std::string matrix_path(const vk::PhysicalInfo& device, Precision precision);

// `--precision auto` on the device, from what it multiplies: bf16 where its matrix units
// take bf16, fp16 (trained with loss scaling) where they take fp16 only, and elsewhere bf16
// storage with fp32 arithmetic (16 bits like fp16, fp32's exponent range, no loss scaling).
Precision auto_precision(const vk::PhysicalInfo& device);

// Records the product on the matrix-unit kernel: ops::matmul's tail once it has checked the
// views and set `spec`'s transposes, formats, bias and epilogue. Views: A, B, bias, C, pre, act.
void matmul_tiles(vk::Commands& cmd, const MatmulTiling& t, const MatmulParams& p, vk::Specialization spec,
                  const std::array<vk::View, 6>& views, const shaders::MatmulPush& push);

}  // namespace brigade::ops
