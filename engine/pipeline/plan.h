// The plan of a pipeline before anything runs: how a mini-batch splits into micro-batches,
// which layers each stage holds, and every buffer each stage will allocate. The stages
// allocate exactly the buffers of their CellLayout, so the memory the planner predicts is
// the memory they use (tests hold them to it).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/model.h"
#include "ops/precision.h"
#include "pipeline/partition.h"
#include "pipeline/schedule.h"
#include "vk/buffer.h"
#include "vk/memory.h"

namespace brigade::pipeline {

inline constexpr uint64_t kFloat = 4;  // bytes of an fp32 element

// Rows of each micro-batch of a mini-batch of `rows` split `micro_batches` ways: the first
// rows % M micro-batches take one row more, so the split is exact when M does not divide N.
// Throws UserError when M is 0 or larger than N.
std::vector<uint32_t> split_rows(uint32_t rows, uint32_t micro_batches);

using Bytes = std::array<uint64_t, vk::kCategories>;  // indexed by vk::Category
uint64_t total(const Bytes& b);

// One cell (a stage's share of the model; interleaved schedules give a stage several) and
// the sizes of everything it allocates.
struct CellLayout {
  uint32_t cell = 0;           // the cell's index in the model's order (its stage is cell % K)
  // Whether the cell runs backward passes. A forward-only cell (evaluation, generation) holds
  // no gradients, gradient buffers or gradient-norm partials, and a set of its activations
  // holds a layer's tensors only while the layers after it need them (activations.h).
  bool training = true;
  uint32_t first = 0, last = 0;  // layers [first, last)
  bool first_cell = false, last_cell = false;  // the model's first / last cell
  uint32_t max_rows = 0;       // samples in the largest micro-batch
  uint32_t inputs = 0;         // micro-batch inputs kept at once (the schedule's Slots)
  uint32_t sets = 0;           // full sets of layer activations kept at once
  uint32_t deferreds = 0;      // split backward: sets of deferred gradients kept at once
  uint64_t input_bytes = 0;    // the cell's input for one micro-batch (kept for each of `inputs`)
  std::vector<uint64_t> output_bytes;             // per layer of the cell; 0 for views
  std::vector<std::vector<uint64_t>> saved_bytes; // per layer, per SavedSpec
  // How each tensor is stored (ops/precision.h): the cell's input as the layer before it
  // stored its output (fp32 for the model's input), each layer's output and saved tensors
  // in the layer's precision (a view's as its input; a `wide` saved tensor in fp32). The
  // gradient of a tensor is rounded to the tensor's precision, so a boundary carries one
  // precision both ways.
  ops::Precision input_precision = ops::Precision::Fp32;
  std::vector<ops::Precision> output_precision;   // per layer of the cell
  // Per layer of the cell: whether its kernels take its 16-bit tensors as stored
  // (StageSpec::stores_half). The others run on fp32 copies: 16-bit tensors unpacked into
  // fp32 work memory for the kernels and packed after, in two parts of `work_part_bytes`
  // (a layer's input and output, or the last layer's output for the loss) and one for its
  // 16-bit saved tensors, the largest of the cell.
  std::vector<bool> direct;
  std::vector<bool> converted;  // per layer of the cell: touches 16 bits, on fp32 copies
  // Per layer of the cell: direct, in a precision of StageSpec::lean_scratch, so its scratch is
  // Layer::scratch_floats(rows, stored, true).
  std::vector<bool> lean;
  // Per layer of the cell: the precision its scratch is sized for (Layer::scratch_floats), a
  // direct layer's 16-bit format, its output's or else its input's (a convolution reading a
  // 16-bit boundary multiplies in 16 bits whatever it stores; other layers reading one there
  // are given room for packed operands they may not take); fp32 for the others.
  std::vector<ops::Precision> scratch_precision;
  uint64_t work_part_bytes = 0;
  uint64_t work_bytes = 0;
  uint64_t gradient_out_bytes = 0;  // a 16-bit input's gradient, packed for the link
  // Split backward (zero-bubble): per layer, per deferred() spec, kept from B to W.
  std::vector<std::vector<uint64_t>> deferred_bytes;
  uint64_t gradient_bytes = 0; // each of the two ping-pong activation-gradient buffers
  // Per layer of the cell: whether its backward writes its input gradient's 16-bit copy for
  // the layer before it, which reads that rather than packing it (Layer::
  // writes_input_gradient_copy, reads_output_gradient_copy: both direct, the boundary 16-bit);
  // the copies go to two ping-pong buffers of gradient_copy_bytes each.
  std::vector<bool> gradient_copies;
  uint64_t gradient_copy_bytes = 0;
  uint64_t scratch_bytes = 0;  // shared transient memory of the layers
  // The products' workspace (vk::Commands::workspace: a split K's parts; set by plan() from
  // StageSpec::workspace_bytes).
  uint64_t workspace_bytes = 0;
  uint64_t norm_bytes = 0;     // partial sums of the gradient-norm reduction (optim::GradNorm)
  uint64_t target_bytes = 0;   // last cell: one micro-batch's targets (kept with each input)
  uint64_t loss_rows_bytes = 0;  // last cell: cross-entropy's per-row scratch, per set
  std::vector<model::ParamSpec> params;  // distinct parameters of the cell
  // A 16-bit layer's copies of its `product` params (model::ParamSpec), the weights its
  // kernels read, made from the fp32 masters before each run's first forward: packed in
  // `stored` where the layer reads_half_weights and takes its 16-bit tensors (direct), else
  // fp32 holding the values rounded to `round`. Counted with the parameters.
  struct WeightCopy {
    std::string name;
    uint64_t elements = 0;
    ops::Precision stored = ops::Precision::Fp32, round = ops::Precision::Fp32;
  };
  std::vector<WeightCopy> weight_copies;
  std::vector<std::vector<int32_t>> weight_copy;  // per layer of the cell, per params() entry: its copy or -1
  // Trainable parameters a layer outside the cell holds too (a GPT's wte, tied to lm_head):
  // the step sums their gradients over the cells on the host, through host memory of their
  // size (transfer buffers).
  std::vector<std::string> tied;
  uint64_t link_bytes = 0;     // link slots this cell's device holds for it (set by plan())
  // The staging buffer of the device's copies from and to the host (DeviceFacts::staging_bytes),
  // counted with the first of the stage's cells (set by plan()).
  uint64_t staging_bytes = 0;

  // Predicted bytes per category. Optimizer state is `optimizer_states` copies of the
  // trainable parameters (AdamW 2, SGD with momentum 1), where the cell trains.
  Bytes memory(uint32_t optimizer_states) const;
  // Where the trainable parameters lie, in params() order, in the cell's parameter arena
  // (and at the same offsets in its gradient and optimizer-state arenas).
  vk::ArenaLayout arena() const;
  // Where the weight copies lie in the cell's copy arena, in weight_copies order.
  vk::ArenaLayout copy_arena() const;
};

// How many inputs and activation sets a cell keeps at once, and whether its backward splits.
struct CellBuffers {
  uint32_t inputs = 1, sets = 1;
  uint32_t deferreds = 0;  // > 0: the backward splits
  bool training = true;    // CellLayout::training
};

// What layout_cell reads of each layer's parameters and saved tensors (a layer's params(),
// saved() and deferred() build their names anew at each call), gathered once for the many
// cells a plan lays out.
struct ModelSpecs {
  explicit ModelSpecs(const model::Model& m);
  const model::Model& model;
  std::vector<std::vector<model::ParamSpec>> params;       // per layer: its params()
  std::vector<std::vector<model::SavedSpec>> saved, deferred;
  std::map<std::string, std::vector<uint32_t>> shared;     // a parameter several layers hold: those layers
};

// `precision`: one per layer of the model (the layers of [first, last) and those before it
// matter), empty for fp32 throughout. `facts`: the stage's device's, as StageSpec's.
CellLayout layout_cell(const ModelSpecs& m, uint32_t cell, uint32_t first, uint32_t last,
                       bool last_cell, uint32_t max_rows, const CellBuffers& buffers,
                       const std::vector<ops::Precision>& precision = {}, const DeviceFacts& facts = {});
// The same for a model laid out once.
CellLayout layout_cell(const model::Model& m, uint32_t cell, uint32_t first, uint32_t last,
                       bool last_cell, uint32_t max_rows, const CellBuffers& buffers,
                       const std::vector<ops::Precision>& precision = {}, const DeviceFacts& facts = {});
// What a device described by `info` makes of `m` (DeviceFacts).
DeviceFacts device_facts(const model::Model& m, const vk::PhysicalInfo& info);
// The precision each layer's output is stored in: its own, a view's that of its input, fp32
// before the first 16-bit layer. `precision` as for layout_cell.
std::vector<ops::Precision> output_precisions(const model::Model& m, const std::vector<ops::Precision>& precision);

// Cost of each layer for the partitioner: time = forward FLOPs x 3 (forward, and backward at
// twice the forward) per sample; memory = parameters, gradients, optimizer state and
// activations of a mini-batch of `rows` (divided by M under re-materialization). Forward
// only (not `training`): forward FLOPs; parameters and one micro-batch's activations.
std::vector<LayerCost> layer_costs(const model::Model& m, uint32_t rows, uint32_t micro_batches,
                                   Remat remat, uint32_t optimizer_states, bool training = true);

// Buffers per link and direction (double buffering: a transfer overlaps the next compute).
inline constexpr uint32_t kLinkSlots = 2;

struct Plan {
  Partition partition;             // of the K x V cells
  Schedule schedule;               // the schedule the buffers are laid out for (forward_only's
                                   // where the plan is not for training)
  Slots slots;                     // which buffers each of its actions uses (assign_slots)
  std::vector<CellLayout> cells;   // in model order; cell c runs on stage c % K
  std::vector<uint32_t> micro_rows;  // split_rows(N, M)
  double bubble = 0;                 // the schedule's, simulated on the planned cell times
  double even_bubble = 0;            // the same with every cell equally fast
  // Predicted bytes of stage k: its cells together.
  Bytes stage_memory(uint32_t k, uint32_t optimizer_states) const;
  // Empty when every stage fits its cap; else one line naming the stage furthest over it, its
  // device and largest categories, and what to change. Nothing is allocated to find out.
  std::string problem;
  // Per stage: the first buffer its device cannot hold (over_device_limits), or empty.
  std::vector<std::string> over_limits;
};

// How to cut: by estimated cost (FLOPs), by memory, or by hand (`balance` non-empty).
enum class Objective { Cost, Memory };

struct PlanOptions {
  uint32_t rows = 1;            // mini-batch size N
  uint32_t micro_batches = 1;   // M
  Remat remat = Remat::Never;
  ScheduleKind schedule = ScheduleKind::GPipe;
  uint32_t virtual_stages = 1;  // cells per stage (interleaved)
  uint32_t optimizer_states = 0;
  Objective objective = Objective::Cost;
  std::vector<uint32_t> balance;   // by hand: layers per cell
  std::vector<StageSpec> stages;   // one per stage: relative speed and memory cap
  // Each stage's precision (one, or one per stage); empty: fp32. `layer_precision`, when
  // given (one per layer of the model), replaces it layer by layer.
  std::vector<ops::Precision> precision;
  std::vector<ops::Precision> layer_precision;
  // Plan::bubble and even_bubble simulated; the planner's search simulates its own.
  bool bubbles = true;
  // False: the pipeline runs forward passes only (evaluation, generation): its schedule is
  // forward_only's, and its cells hold only what a forward needs (CellLayout::training).
  bool training = true;
};

// The cut minimizes the slowest stage among those whose exact footprint fits each cap; when
// none fits, the plan holds the cut with the smallest fullest stage, and `problem` says why.
Plan plan(const model::Model& m, const PlanOptions& o);

}  // namespace brigade::pipeline
