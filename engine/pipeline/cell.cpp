#include "pipeline/cell.h"

#include <cstring>

#include "model/operand.h"
#include "ops/cross_entropy.h"
#include "ops/precision.h"
#include "optim/clip.h"
#include "util/error.h"

namespace brigade::pipeline {

namespace {


vk::Category category_of(model::ParamKind kind) {
  return kind == model::ParamKind::State ? vk::Category::Scratch : vk::Category::Parameters;
}

}  // namespace

Cell::Cell(vk::Device& device, const model::Model& model, CellLayout layout)
    : device_(device), model_(model), layout_(std::move(layout)) {
  const std::string tag = "stage " + std::to_string(layout_.cell) + " ";
  // The trainable parameters and their gradients in two arenas of the same layout, so the
  // optimizer updates and the step zeroes all of them in one pass; the others apart.
  const vk::ArenaLayout arena = layout_.arena();
  if (arena.bytes) {
    param_arena_ = vk::Buffer(device, arena.bytes, vk::Category::Parameters, tag + "parameters");
    vk::zero(param_arena_);  // the padding too
  }
  if (arena.bytes && layout_.training) {
    grad_arena_ = vk::Buffer(device, arena.bytes, vk::Category::Gradients, tag + "gradients");
    vk::zero(grad_arena_);
  }
  for (const model::ParamSpec& p : layout_.params) {
    const uint64_t bytes = p.elements() * kFloat;
    if (p.kind != model::ParamKind::Trainable) {
      params_.emplace(p.name, vk::Buffer(device, bytes, category_of(p.kind), p.name));
      continue;
    }
    const uint64_t at = arena.offsets[trainable_.size()];
    params_.emplace(p.name, vk::Buffer(param_arena_, at, bytes, p.name));
    if (grad_arena_) grads_.emplace(p.name, vk::Buffer(grad_arena_, at, bytes, p.name + ".grad"));
    trainable_.push_back(p.name);
  }
  for (uint32_t l = layout_.first; l < layout_.last; ++l) {
    std::vector<vk::View> ps, gs;
    for (const model::ParamSpec& p : model_.layers[l]->params()) {
      ps.emplace_back(params_.at(p.name));
      if (layout_.training)  // a forward reads no gradient
        gs.emplace_back(p.kind == model::ParamKind::Trainable ? grads_.at(p.name) : params_.at(p.name));
    }
    param_views_.push_back(std::move(ps));
    grad_views_.push_back(std::move(gs));
  }
  // The weight copies of 16-bit layers, which their kernels read in place of the masters.
  const vk::ArenaLayout copies = layout_.copy_arena();
  if (copies.bytes) copy_arena_ = vk::Buffer(device, copies.bytes, vk::Category::Parameters, tag + "weight copies");
  copies_.reserve(layout_.weight_copies.size());  // views point at them
  for (size_t i = 0; i < layout_.weight_copies.size(); ++i) {
    const CellLayout::WeightCopy& c = layout_.weight_copies[i];
    copies_.emplace_back(copy_arena_, copies.offsets[i], ops::stored_bytes(c.elements, c.stored),
                         c.name + " " + ops::precision_name(c.round));
  }
  kernel_views_ = param_views_;
  weight_precision_.assign(kernel_views_.size(), ops::Precision::Fp32);
  for (size_t l = 0; l < kernel_views_.size(); ++l)
    for (size_t j = 0; j < kernel_views_[l].size(); ++j)
      if (const int32_t i = layout_.weight_copy[l][j]; i >= 0) {
        kernel_views_[l][j] = vk::View(copies_[i]);
        weight_precision_[l] = layout_.weight_copies[i].stored;
      }
  const auto act = vk::Category::Activations;
  // The batch's inputs (the model's first cell) and targets (its last) are written by the host:
  // in host memory, loading a micro-batch is a copy, not a transfer through the queue, which
  // would wait for all the queue's earlier work and hold a staging buffer the plan does not.
  const auto input_residency = layout_.first_cell ? vk::Residency::Host : vk::Residency::Device;
  for (uint32_t i = 0; i < layout_.inputs; ++i) {
    inputs_.emplace_back(device, layout_.input_bytes, act, tag + "input " + std::to_string(i), input_residency);
    if (layout_.last_cell)
      targets_.emplace_back(device, layout_.target_bytes, act, tag + "targets " + std::to_string(i),
                            vk::Residency::Host);
  }
  for (uint32_t s = 0; s < layout_.sets; ++s) sets_.push_back(make_set(device, layout_, tag));
  for (uint32_t d = 0; d < layout_.deferreds; ++d) {
    std::vector<std::vector<vk::Buffer>> slot;
    for (uint32_t l = 0; l < layout_.deferred_bytes.size(); ++l) {
      std::vector<vk::Buffer> kept;
      for (uint64_t bytes : layout_.deferred_bytes[l])
        kept.emplace_back(device, bytes, act, tag + "layer " + std::to_string(layout_.first + l) + " deferred");
      slot.push_back(std::move(kept));
    }
    deferred_.push_back(std::move(slot));
  }
  if (layout_.gradient_bytes) {
    grad_a_ = vk::Buffer(device, layout_.gradient_bytes, act, tag + "activation gradient A");
    grad_b_ = vk::Buffer(device, layout_.gradient_bytes, act, tag + "activation gradient B");
  }
  if (layout_.gradient_copy_bytes) {
    copy_a_ = vk::Buffer(device, layout_.gradient_copy_bytes, act, tag + "activation gradient A, packed");
    copy_b_ = vk::Buffer(device, layout_.gradient_copy_bytes, act, tag + "activation gradient B, packed");
  }
  if (layout_.scratch_bytes)
    scratch_ = vk::Buffer(device, layout_.scratch_bytes, vk::Category::Scratch, tag + "scratch");
  if (layout_.workspace_bytes)
    workspace_ = vk::Buffer(device, layout_.workspace_bytes, vk::Category::Scratch, tag + "products' workspace");
  if (layout_.work_bytes) work_ = vk::Buffer(device, layout_.work_bytes, vk::Category::Scratch, tag + "fp32 work");
  for (uint32_t l = 0; l < layout_.direct.size(); ++l)
    BRIGADE_EXPECT(!layout_.direct[l] || model_.layers[layout_.first + l]->stores_half(device.info()),
                   "layer " + std::to_string(layout_.first + l) + " was planned to take 16 bits on another device");
  for (uint32_t l = 0; l < layout_.lean.size(); ++l)
    BRIGADE_EXPECT(!layout_.lean[l] || (model_.layers[layout_.first + l]->lean_scratch(device.info()) >>
                                            uint32_t(layout_.output_precision[l]) & 1u),
                   "layer " + std::to_string(layout_.first + l) + " was planned with another device's lean scratch");
  if (layout_.gradient_out_bytes)
    grad_out_ = vk::Buffer(device, layout_.gradient_out_bytes, act, tag + "input gradient, packed");
  if (layout_.last_cell) {
    // The host reads the loss and the correct count: host memory, as the batch's targets.
    loss_ = vk::Buffer(device, kFloat, vk::Category::Scratch, tag + "loss", vk::Residency::Host);
    discard_ = vk::Buffer(device, kFloat, vk::Category::Scratch, tag + "recomputed loss");
    correct_ = vk::Buffer(device, kFloat, vk::Category::Scratch, tag + "correct", vk::Residency::Host);
  }
  for (const std::string& name : layout_.tied)
    tied_host_.emplace(name, vk::Buffer(device, grads_.at(name).size(), vk::Category::Transfer,
                                        tag + name + " tied sum", vk::Residency::Host));
}

uint64_t Cell::in_floats(uint32_t l, const MicroBatch& mb) const {
  return model::elements(model_.layers[layout_.first + l]->input_shape()) * mb.rows;
}

uint64_t Cell::out_floats(uint32_t l, const MicroBatch& mb) const {
  return model::elements(model_.layers[layout_.first + l]->output_shape()) * mb.rows;
}

vk::View Cell::x_view(uint32_t l, const MicroBatch& mb) {
  if (l == 0) return vk::View(inputs_.at(mb.input), 0, ops::stored_bytes(in_floats(0, mb), layout_.input_precision));
  return y_view(l - 1, mb);
}

vk::View Cell::y_view(uint32_t l, const MicroBatch& mb) {
  if (model_.layers[layout_.first + l]->is_view()) return x_view(l, mb);
  return vk::View(sets_[mb.set].outputs[l], 0, ops::stored_bytes(out_floats(l, mb), layout_.output_precision[l]));
}

bool Cell::narrow(uint32_t l, const model::SavedSpec& s) const {
  return ops::is_half(layout_.output_precision[l]) && !s.wide && !model_.layers[layout_.first + l]->is_view();
}

bool Cell::direct(uint32_t l) const { return !layout_.direct.empty() && layout_.direct[l]; }

vk::View Cell::work(uint32_t part, uint64_t floats, uint64_t offset) {
  const uint64_t at = part * layout_.work_part_bytes + offset * kFloat;
  BRIGADE_EXPECT(work_ && at + floats * kFloat <= work_.size(), "16-bit tensors fit the cell's fp32 work");
  return vk::View(work_, at, floats * kFloat);
}

vk::View Cell::fp32(vk::Commands& cmd, vk::View stored, ops::Precision p, uint64_t n, uint32_t part) {
  if (!ops::is_half(p)) return stored;
  const vk::View out = work(part, n);
  ops::unpack(cmd, stored, out, uint32_t(n), p);
  return out;
}

model::Tensors Cell::unpacked(vk::Commands& cmd, uint32_t l, const MicroBatch& mb, const model::Tensors& t,
                              std::vector<vk::View>& saved32) {
  const model::Layer& layer = *model_.layers[layout_.first + l];
  model::Tensors w = t;  // what the layer does not read stays as stored
  if (direct(l)) {
    w.x_precision = x_precision(l), w.y_precision = layout_.output_precision[l];
    return w;
  }
  if (!layer.integer_input() && layer.backward_reads_input()) w.x = fp32(cmd, t.x, x_precision(l), in_floats(l, mb), 0);
  if (layer.backward_reads_output()) w.y = fp32(cmd, t.y, layout_.output_precision[l], out_floats(l, mb), 1);
  const std::vector<model::SavedSpec> specs = layer.saved();
  uint64_t offset = 0;
  for (size_t s = 0; s < specs.size(); ++s) {
    if (!narrow(l, specs[s])) {
      saved32.push_back(t.saved[s]);
      continue;
    }
    const uint64_t n = specs[s].floats(mb.rows);
    saved32.push_back(work(2, n, offset));
    ops::unpack(cmd, t.saved[s], saved32.back(), uint32_t(n), layout_.output_precision[l]);
    offset += model::aligned_floats(n);  // the next view where a device binds one (plan.cpp)
  }
  w.saved = saved32;
  return w;
}

vk::View Cell::targets_view(const MicroBatch& mb) {
  return vk::View(targets_.at(mb.input), 0, uint64_t(mb.rows) * model_.targets_per_sample * kFloat);
}

model::Tensors Cell::tensors(uint32_t l, const MicroBatch& mb, std::vector<vk::View>& saved,
                              std::vector<vk::View>& deferred) {
  const model::Layer& layer = *model_.layers[layout_.first + l];
  const Set& set = sets_[mb.set];
  const std::vector<model::SavedSpec> specs = layer.saved();
  for (size_t s = 0; s < specs.size(); ++s)
    saved.emplace_back(set.saved[l][s], 0,
                       ops::stored_bytes(specs[s].floats(mb.rows),
                                         narrow(l, specs[s]) ? layout_.output_precision[l] : ops::Precision::Fp32));
  if (splits(l) && mb.deferred < deferred_.size()) {
    const std::vector<model::SavedSpec> kept = layer.deferred();
    for (size_t s = 0; s < kept.size(); ++s)
      deferred.emplace_back(deferred_.at(mb.deferred)[l][s], 0, kept[s].floats(mb.rows) * kFloat);
  }
  model::Tensors t{x_view(l, mb), y_view(l, mb), saved, kernel_views_[l], grad_views_[l], std::nullopt, deferred};
  t.w_precision = weight_precision_[l];
  t.forward_only = !layout_.training;
  if (scratch_)
    t.scratch = vk::View(scratch_, 0,
                         layer.cell_scratch_floats(mb.rows, layout_.scratch_precision.at(l),
                                                   !layout_.lean.empty() && layout_.lean[l], t.forward_only) * kFloat);
  return t;
}

model::Pass Cell::pass(vk::Commands& cmd, const MicroBatch& mb, uint32_t l, bool recompute) const {
  cmd.set_workspace(workspace_ ? std::optional(vk::View(workspace_)) : std::nullopt);
  model::Pass p{cmd};
  p.rows = mb.rows, p.total_rows = mb.total_rows, p.step = mb.step, p.micro_batch = mb.index;
  p.layer = layout_.first + l, p.training = mb.training, p.recompute = recompute;
  return p;
}

vk::View Cell::forward(vk::Commands& cmd, const MicroBatch& mb, std::optional<vk::View> received,
                        bool recompute) {
  BRIGADE_EXPECT(mb.rows <= layout_.max_rows && mb.input < inputs_.size() && mb.set < sets_.size(),
                 "micro-batch " + std::to_string(mb.index) + " of " + std::to_string(mb.rows) +
                     " rows does not fit the stage's layout");
  if (received) {
    const vk::View x = x_view(0, mb);
    cmd.copy(*received->buffer, *x.buffer, x.range, received->offset, 0);
  }
  const uint32_t n = uint32_t(layout_.output_bytes.size());
  // A 16-bit layer computes into fp32 work and packs its output (rounding the work in place)
  // and saved tensors after. `live`: the work part holding the next layer's input, if any.
  int live = -1;
  if (forward_marks_) forward_marks_->push_back(cmd.timestamp());
  for (uint32_t l = 0; l < n; ++l) {
    const model::Layer& layer = *model_.layers[layout_.first + l];
    if (forward_marks_ && l) forward_marks_->push_back(cmd.timestamp());
    if (layer.is_view()) continue;
    std::vector<vk::View> saved, deferred, saved32;
    const model::Tensors t = tensors(l, mb, saved, deferred);
    const ops::Precision py = layout_.output_precision[l];
    const uint32_t in = live >= 0 ? uint32_t(live) : 0;
    model::Tensors w = t;
    if (direct(l)) {  // reads its input as stored, whatever work holds
      w.x_precision = x_precision(l), w.y_precision = py;
      layer.forward(pass(cmd, mb, l, recompute), w);
      live = -1;
      continue;
    }
    if (ops::is_half(x_precision(l)) && !layer.integer_input())
      w.x = live >= 0 ? work(in, in_floats(l, mb)) : fp32(cmd, t.x, x_precision(l), in_floats(l, mb), in);
    const std::vector<model::SavedSpec> specs = layer.saved();
    if (ops::is_half(py)) {
      w.y = work(1 - in, out_floats(l, mb));
      uint64_t offset = 0;
      for (size_t s = 0; s < specs.size(); ++s) {
        if (!narrow(l, specs[s])) {
          saved32.push_back(t.saved[s]);
          continue;
        }
        saved32.push_back(work(2, specs[s].floats(mb.rows), offset));
        offset += model::aligned_floats(specs[s].floats(mb.rows));
      }
      w.saved = saved32;
    }
    layer.forward(pass(cmd, mb, l, recompute), w);
    live = -1;
    if (!ops::is_half(py)) continue;
    ops::pack(cmd, w.y, t.y, uint32_t(out_floats(l, mb)), py, true);
    for (size_t s = 0; s < specs.size(); ++s)
      if (narrow(l, specs[s])) ops::pack(cmd, saved32[s], t.saved[s], uint32_t(specs[s].floats(mb.rows)), py, false);
    live = int(1 - in);
  }
  if (forward_marks_) forward_marks_->push_back(cmd.timestamp());
  const vk::View out = y_view(n - 1, mb);
  if (layout_.last_cell && mb.training) {
    const uint32_t tps = model_.targets_per_sample;
    const ops::Precision p = layout_.output_precision[n - 1];
    const vk::View logits = live >= 0 ? work(uint32_t(live), out_floats(n - 1, mb)) : fp32(cmd, out, p, out_floats(n - 1, mb), 0);
    ops::cross_entropy_forward(cmd, logits, targets_view(mb), sets_[mb.set].loss_rows, recompute ? discard_ : loss_,
                               mb.rows * tps, model_.classes, mb.total_rows * tps);
  }
  return out;
}

void Cell::count_correct(vk::Commands& cmd, const MicroBatch& mb) {
  const uint32_t tps = model_.targets_per_sample, n = uint32_t(layout_.output_bytes.size());
  const vk::View logits = fp32(cmd, y_view(n - 1, mb), layout_.output_precision[n - 1], out_floats(n - 1, mb), 0);
  ops::cross_entropy_evaluate(cmd, logits, targets_view(mb),
                              sets_[mb.set].loss_rows, loss_, correct_, mb.rows * tps,
                              model_.classes, mb.total_rows * tps);
}

std::optional<vk::View> Cell::backward(vk::Commands& first, const MicroBatch& mb,
                                        std::optional<vk::View> received, bool split,
                                        const AfterLayer& after_layer) {
  vk::Commands* c = &first;
  BRIGADE_EXPECT(layout_.training, "a backward on a cell planned for forward passes only");
  BRIGADE_EXPECT(!split || layout_.deferreds == 0 || mb.deferred < deferred_.size(),
                 "a split backward keeps its deferred gradients in a slot of the layout");
  const uint32_t n = uint32_t(layout_.output_bytes.size());
  vk::Buffer* dy = &grad_a_;
  vk::Buffer* dx = &grad_b_;
  // dy's packed copy where the layer after wrote one (CellLayout::gradient_copies), and where
  // the next copy goes.
  vk::Buffer* dy_copy = &copy_a_;
  vk::Buffer* dx_copy = &copy_b_;
  bool copied = false;
  // The gradient of a tensor is rounded to the tensor's precision (so pipelined equals one
  // device, and a boundary carries one precision both ways); inside a cell it stays fp32.
  const vk::View out = y_view(n - 1, mb);
  const ops::Precision p_out = layout_.output_precision[n - 1];
  const uint64_t n_out = out_floats(n - 1, mb);
  if (layout_.last_cell) {
    const uint32_t tps = model_.targets_per_sample;
    ops::cross_entropy_backward(*c, fp32(*c, out, p_out, n_out, 0), targets_view(mb), sets_[mb.set].loss_rows,
                                vk::View(*dy, 0, n_out * kFloat), mb.rows * tps, model_.classes,
                                mb.total_rows * tps);
    if (mb.loss_scale != 1) optim::scale(*c, vk::View(*dy, 0, n_out * kFloat), uint32_t(n_out), mb.loss_scale);
    ops::round_to(*c, vk::View(*dy, 0, n_out * kFloat), uint32_t(n_out), p_out);
  } else {
    BRIGADE_EXPECT(received.has_value(), "a stage before the last needs its output's gradient");
    if (ops::is_half(p_out)) ops::unpack(*c, *received, vk::View(*dy, 0, n_out * kFloat), uint32_t(n_out), p_out);
    else c->copy(*received->buffer, *dy, out.range, received->offset, 0);
  }
  if (backward_marks_) backward_marks_->push_back(c->timestamp());
  for (uint32_t l = n; l-- > 0;) {
    const model::Layer& layer = *model_.layers[layout_.first + l];
    if (backward_marks_ && l + 1 < n) backward_marks_->push_back(c->timestamp());
    if (layer.is_view()) {  // the gradient of a view is the view of the gradient
      if (after_layer) c = &after_layer(l, *c);
      continue;
    }
    const bool wants_dx = wants_input_gradient(l);
    std::vector<vk::View> saved, deferred, saved32;
    model::Tensors t = unpacked(*c, l, mb, tensors(l, mb, saved, deferred), saved32);
    const bool copies = wants_dx && layout_.gradient_copies[l];
    if (copied) t.dy_copy = vk::View(*dy_copy, 0, ops::stored_bytes(out_floats(l, mb), layout_.output_precision[l]));
    if (copies) t.dx_copy = vk::View(*dx_copy, 0, ops::stored_bytes(in_floats(l, mb), x_precision(l)));
    const vk::View dy_view(*dy, 0, out_floats(l, mb) * kFloat);
    model::Pass p = pass(*c, mb, l, false);
    p.split = split && splits(l);
    if (wants_dx) {
      const vk::View dx_view(*dx, 0, in_floats(l, mb) * kFloat);
      // Cleared where the layer adds into it: only its part, not the whole buffer.
      if (!layer.writes_input_gradient()) c->fill(dx_view);
      layer.backward(p, t, dy_view, dx_view);
      if (!direct(l)) ops::round_to(*c, dx_view, uint32_t(in_floats(l, mb)), x_precision(l));
      std::swap(dy, dx);
      std::swap(dy_copy, dx_copy);
    } else {
      layer.backward(p, t, dy_view, std::nullopt);
    }
    copied = copies;
    if (after_layer) c = &after_layer(l, *c);
  }
  if (backward_marks_) backward_marks_->push_back(c->timestamp());
  if (layout_.first_cell) return std::nullopt;
  const vk::View gradient(*dy, 0, in_floats(0, mb) * kFloat);
  if (!ops::is_half(layout_.input_precision)) return gradient;
  const vk::View packed(grad_out_, 0, x_view(0, mb).range);
  ops::pack(*c, gradient, packed, uint32_t(in_floats(0, mb)), layout_.input_precision, false);
  return packed;
}

void Cell::backward_params(vk::Commands& cmd, const MicroBatch& mb) {
  for (uint32_t l = uint32_t(layout_.output_bytes.size()); l-- > 0;) {
    if (!splits(l)) continue;
    std::vector<vk::View> saved, deferred, saved32;
    const model::Tensors t = unpacked(cmd, l, mb, tensors(l, mb, saved, deferred), saved32);
    model::Pass p = pass(cmd, mb, l, false);
    p.split = true;
    model_.layers[layout_.first + l]->backward_params(p, t);
  }
}

bool Cell::wants_input_gradient(uint32_t l) const {
  if (model_.layers[layout_.first + l]->integer_input()) return false;
  if (!layout_.first_cell) return true;
  for (uint32_t j = 0; j < l; ++j)
    if (!model_.layers[layout_.first + j]->is_view()) return true;
  return false;
}

void Cell::zero_gradients(vk::Commands& cmd) {
  if (grad_arena_) cmd.fill(grad_arena_);
}

void Cell::zero_loss(vk::Commands& cmd) {
  if (!layout_.last_cell) return;
  cmd.fill(loss_);
  cmd.fill(correct_);
}

void Cell::end_minibatch(vk::Commands& cmd) {
  for (uint32_t l = 0; l < param_views_.size(); ++l)
    model_.layers[layout_.first + l]->end_minibatch(cmd, param_views_[l]);
}

void Cell::refresh_weight_copies(vk::Commands& cmd) {
  for (size_t i = 0; i < copies_.size(); ++i) {
    const CellLayout::WeightCopy& c = layout_.weight_copies[i];
    const vk::Buffer& master = params_.at(c.name);
    const uint32_t n = uint32_t(c.elements);
    if (ops::is_half(c.stored)) {
      ops::pack(cmd, master, copies_[i], n, c.stored, false);
    } else {
      cmd.copy(master, copies_[i], c.elements * kFloat);
      ops::round_to(cmd, copies_[i], n, c.round);
    }
  }
}

void Cell::copy_tied_gradients(vk::Commands& cmd, bool to_host) {
  for (auto& [name, host] : tied_host_) {
    vk::Buffer& g = grads_.at(name);
    if (to_host) cmd.copy(g, host, g.size());
    else cmd.copy(host, g, g.size());
  }
}

float* Cell::tied_host(const std::string& name) { return static_cast<float*>(tied_host_.at(name).mapped()); }

}  // namespace brigade::pipeline
