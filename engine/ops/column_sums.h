// How the kernels that add a tensor's sums down its rows to gradients (linear_bias_backward,
// linear_relu_backward, layernorm_backward_weight; shaders/column_sums.h) walk it: invocations
// down each column, and the rows cut into runs that workgroups of their own sum apart.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "vk/commands.h"
#include "vk/kernel.h"

namespace brigade::ops {

// `lanes` invocations down each column (0: the device's choice: one on CPU devices, 64 on
// GPUs), and the rows cut into `runs` (0: the device's choice), each summed by workgroups of
// its own into partial sums in the recording's workspace that a second pass then adds to the
// gradient in order. A sum's bits depend on its lanes and runs alone. The device's choice is
// one run on CPU devices or where the recording has no workspace (each workgroup runs on one
// thread there, and a few hundred columns already make several); on GPUs, as many runs as make
// about 1024 workgroups with each lane walking 16 rows or more (a second pass costs a dispatch,
// so small sums keep one): a LayerNorm of 768 channels over 16k rows is otherwise 48
// workgroups, a third of an H200's multiprocessors, and takes 16 runs.
struct ColumnWalk {
  ColumnWalk(uint32_t lanes_ = 0, uint32_t runs_ = 0) : lanes(lanes_), runs(runs_) {}
  uint32_t lanes, runs;
};

// The runs a GPU's column sum of `workgroups` workgroups over `rows` rows with `lanes` lanes
// takes by default (as above; before fitting the workspace).
uint32_t gpu_column_runs(uint32_t workgroups, uint32_t rows, uint32_t lanes);

// One column sum's launch: `items` columns (or quads of columns) of `floats` floats in all, over
// `rows` rows, adding to `outputs` gradients of `floats` floats each.
class ColumnSums {
 public:
  ColumnSums(vk::Commands& cmd, uint32_t items, uint32_t floats, uint32_t rows, ColumnWalk walk,
             vk::Specialization spec, uint32_t outputs);
  // `spec` with the lanes (constant 1) and the columns a workgroup takes (constant 2).
  const vk::Specialization& spec() const { return spec_; }
  vk::Groups groups() const { return groups_; }
  uint32_t runs() const { return groups_.y; }
  // What the kernel binds for output `i`: the gradient in one run, else its runs' partial sums.
  vk::View into(uint32_t i, vk::View gradient) const { return partials_.empty() ? gradient : partials_.at(i); }
  // After the kernel: the runs' partial sums added to the gradients in order (none in one run).
  void finish(vk::Commands& cmd, std::initializer_list<vk::View> gradients) const;

 private:
  vk::Specialization spec_;
  vk::Groups groups_;
  uint32_t floats_ = 0;
  std::vector<vk::View> partials_;
};

}  // namespace brigade::ops
