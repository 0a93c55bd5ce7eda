// The two forms of the layers whose work is matrix products (convolution, attention): as
// products on the matrix kernel (ops/matmul.h), or through direct kernels that walk their own
// loops. The matrix form is the default; SwiftShader runs the convolutions' direct kernels
// (chosen when its matrix kernel ran 0.13 to 0.31 GFLOPS; with its constants folded on the host,
// fashion-cnn's step took 338 and 314 ms direct against 368 and 311 in the matrix form:
// docs/BENCHMARKS.md), and attention the matrix form (attention_form_for).
#pragma once

#include <optional>

#include "vk/commands.h"
#include "vk/physical.h"

namespace brigade::ops {

// Winograd: the convolution's 3x3 stride-1 passes through Winograd's transforms and 16
// products (ops/conv2d_winograd.h), the matrix form's choice for those shapes; convolution
// only. Fused: attention's direct kernels staging blocks of rows in shared memory, flash
// attention on SIMT cores (ops/attention.h); attention only.
enum class Form { Matrix, Winograd, Direct, Fused };

// The form `info`'s device runs.
Form form_for(const vk::PhysicalInfo& info);

// The form attention takes, on every device: the matrix form, Fused where the tensors are
// 16-bit and the device multiplies matrices of their type (`half_on_matrix_units`: flash
// attention on matrix tiles), unless BRIGADE_ATTENTION says matrix, direct or fused (read
// once; auto is the default).
Form attention_form_for(bool half_on_matrix_units = false);

}  // namespace brigade::ops
