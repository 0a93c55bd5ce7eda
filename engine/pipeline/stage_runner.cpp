#include "pipeline/stage_runner.h"

#include <algorithm>

#include "pipeline/executor_shared.h"
#include "util/error.h"

namespace brigade::pipeline {
namespace {

// The action kinds a device loss can be injected at (vk::Device::begin_action).
const char* fault_word(Op op) {
  switch (op) {
    case Op::Forward: return "forward";
    case Op::Backward: return "backward";
    case Op::Step: return "step";
    case Op::SendActivation:
    case Op::SendGradient: return "send";
    default: return nullptr;
  }
}

}  // namespace

StageRunner::StageRunner(Executor& ex, uint32_t stage, const Schedule& schedule, const Slots& slots,
                         const Batch& batch, const Update& update, std::vector<float>* outputs)
    : ex_(ex), k_(stage), schedule_(schedule), batch_(batch), update_(update), outputs_(outputs), slots_(slots),
      dev_(*ex.devices_[stage]),
      group_(ex.topology_->pipeline(stage)), cursors_(schedule.virtual_stages) {
  const uint32_t M = schedule.micro_batches;
  for (Cursor& m : cursors_) {
    m.recv_act = m.send_act = ex.forwards_;
    m.recv_grad = m.send_grad = ex.backwards_;
    for (auto* v : {&m.act_in, &m.act_out, &m.grad_in, &m.grad_out, &m.fwd_value, &m.bwd_value}) v->assign(M, 0);
  }
  const uint64_t per_link = std::max(ex.options_.slots, 1u);
  const uint64_t turn = (ex.forwards_ % per_link) * per_link + ex.backwards_ % per_link;
  ring_ = &ex.shared_->rings[stage][turn * 2 + (schedule.training ? 0 : 1)];
  const std::vector<Action>& actions = schedule.actions[stage];
  for (size_t x = 0; x < actions.size(); ++x)
    if (actions[x].op == Op::Backward || actions[x].op == Op::WeightGradient) cursors_[actions[x].cell].last_gradient = x;
}

bool StageRunner::run() {
  try {
    const std::vector<Action>& actions = schedule_.actions[k_];
    const Executor::RunState& st = *ex_.state_;
    const uint32_t M = schedule_.micro_batches;
    const uint32_t first_index = ex_.topology_->replica() * M;  // random keys: the replica's micro-batches
    for (x_ = 0; x_ < actions.size(); ++x_) {
      if (ex_.abort_.raised()) return false;
      const Action& a = actions[x_];
      const uint32_t i = a.micro_batch;
      const MicroBatch mb{first_index + i, slots_.input[k_][x_], slots_.set[k_][x_], slots_.deferred[k_][x_],
                          i < M ? st.rows[i] : 0, st.total_rows, uint32_t(update_.run_step()), schedule_.training,
                          float(update_.loss_scale)};
      if (const char* word = fault_word(a.op)) dev_.begin_action(word);
      switch (a.op) {
        case Op::RecvActivation: receive_activation(a); break;
        case Op::Forward: forward(a, mb); break;
        case Op::SendActivation: send_activation(a); break;
        case Op::RecvGradient: receive_gradient(a); break;
        case Op::Recompute: recompute(a, mb); break;
        case Op::Backward: backward(a, mb); break;
        case Op::SendGradient: send_gradient(a); break;
        case Op::WeightGradient: weight_gradient(a, mb); break;
        case Op::Step:
          if (!step(a)) return false;
          break;
      }
    }
    finish();
    return true;
  } catch (...) {
    ex_.abort_.raise(std::current_exception());
    return false;
  }
}

vk::Commands& StageRunner::begin(const Action& a) {
  if (next_cmd_ == ring_->size()) {
    ring_->push_back(std::make_unique<vk::Commands>(dev_, "stage " + std::to_string(k_) + " action " +
                                                              std::to_string(next_cmd_)));
    ring_->back()->set_replay(ex_.options_.replay);
  }
  vk::Commands& c = *(*ring_)[next_cmd_++];
  open_start_us_ = now_us() - waited_us_, open_cpu_us_ = cpu_us() - waited_cpu_us_;
  open_dispatches_ = c.dispatches(), open_barriers_ = c.barriers();
  ActionEvent e{k_, to_string(a, schedule_.virtual_stages > 1)};
  c.reset();
  c.after_earlier_submissions();
  if (dev_.info().timestamps) c.timestamp();
  recorded_.push_back({&c, e});
  return c;
}

uint64_t StageRunner::submit(vk::Commands& c) {
  if (dev_.info().timestamps) c.timestamp();
  ActionEvent& e = recorded_.back().second;
  e.submit_us = now_us();
  e.record_us = e.submit_us - waited_us_ - open_start_us_;
  e.record_cpu_us = cpu_us() - waited_cpu_us_ - open_cpu_us_;  // 0 unless cpu_times
  e.dispatches = c.dispatches() - open_dispatches_, e.barriers = c.barriers() - open_barriers_;
  if (ex_.abort_.raised()) throw UserError("stopped: another stage failed");
  const uint64_t replays = c.replays();
  last_value_ = c.submit();
  e.replayed = c.replays() > replays;
  return last_value_;
}

double StageRunner::cpu_us() const { return ex_.options_.cpu_times ? thread_cpu_us() : 0; }

template <class F>
void StageRunner::wait(F&& f) {
  const double t0 = now_us(), c0 = cpu_us();
  f([this] { return ex_.abort_.raised(); });
  waited_us_ += now_us() - t0, waited_cpu_us_ += cpu_us() - c0;
}

uint64_t StageRunner::used(const MicroBatch& mb, uint64_t value) {
  Cursor& m = cursors_[schedule_.actions[k_][x_].cell];
  if (mb.input != Slots::kNone) {
    m.input_used.resize(std::max<size_t>(m.input_used.size(), mb.input + 1));
    m.input_used[mb.input] = value;
  }
  return value;
}

uint64_t StageRunner::first_row(uint32_t i) const {
  const Executor::RunState& st = *ex_.state_;
  uint64_t row = st.share.first;
  for (uint32_t j = 0; j < i; ++j) row += st.rows[j];
  return row;
}

void StageRunner::receive_activation(const Action& a) {
  Cursor& m = cursors_[a.cell];
  const uint32_t i = a.micro_batch, c = schedule_.cell_of(k_, a);
  m.act_in[i] = m.recv_act++;
  wait([&](const StopFn& stop) { ex_.act_links_[c - 1]->wait_arrived(m.act_in[i], stop); });
}

void StageRunner::forward(const Action& a, const MicroBatch& mb) {
  Cursor& m = cursors_[a.cell];
  const uint32_t i = a.micro_batch, c = schedule_.cell_of(k_, a), C = ex_.cells();
  Cell& s = *ex_.cells_[c];
  const model::Model& model = ex_.model_;
  const uint64_t row = first_row(i);
  // The host writes the kept input: whatever read that slot before must be done.
  if ((s.layout().first_cell || s.layout().last_cell) && mb.input < m.input_used.size() && m.input_used[mb.input])
    dev_.wait(m.input_used[mb.input]);
  if (s.layout().first_cell) {
    const uint64_t per_row = model::elements(model.input);
    const void* src = model.token_input ? static_cast<const void*>(batch_.tokens.data() + row * per_row)
                                        : static_cast<const void*>(batch_.images.data() + row * per_row);
    vk::upload(s.input(mb.input), src, per_row * mb.rows * kFloat);
  }
  if (s.layout().last_cell) {
    const uint64_t tps = model.targets_per_sample;
    vk::upload(s.targets(mb.input), batch_.targets.data() + row * tps, mb.rows * tps * kFloat);
  }
  vk::Commands& cmd = begin(a);
  if (m.first_forward) s.zero_loss(cmd), s.refresh_weight_copies(cmd), m.first_forward = false;
  std::optional<vk::View> received;
  if (c > 0) received = vk::View(ex_.act_links_[c - 1]->receive(m.act_in[i]));
  const vk::View out = s.forward(cmd, mb, received, false);
  if (c + 1 < C) {
    Link& link = *ex_.act_links_[c];
    m.act_out[i] = m.send_act++;
    wait([&](const StopFn& stop) { link.wait_free(m.act_out[i], stop); });
    cmd.copy(*out.buffer, link.send(m.act_out[i]), out.range, out.offset, 0);
  }
  if (!schedule_.training && s.layout().last_cell) s.count_correct(cmd, mb);
  m.fwd_value[i] = used(mb, submit(cmd));
  if (outputs_ && s.layout().last_cell) {
    dev_.wait(m.fwd_value[i]);
    const uint64_t per_row = model::elements(model.layers.back()->output_shape());
    const ops::Precision p = s.layout().output_precision.back();
    if (ops::is_half(p)) {
      std::vector<uint32_t> packed(out.range / 4);
      vk::download(*out.buffer, packed.data(), out.range, out.offset);
      ops::unpack_on_host(packed, std::span(outputs_->data() + row * per_row, per_row * mb.rows), p);
    } else {
      vk::download(*out.buffer, outputs_->data() + row * per_row, out.range, out.offset);
    }
  }
  if (c > 0) ex_.act_links_[c - 1]->release(m.act_in[i], dev_, m.fwd_value[i]);
}

void StageRunner::send_activation(const Action& a) {
  const Cursor& m = cursors_[a.cell];
  const uint32_t i = a.micro_batch;
  ex_.act_links_[schedule_.cell_of(k_, a)]->post(m.act_out[i], dev_, m.fwd_value[i],
                                                 to_string(a, schedule_.virtual_stages > 1));
}

void StageRunner::receive_gradient(const Action& a) {
  Cursor& m = cursors_[a.cell];
  const uint32_t i = a.micro_batch, c = schedule_.cell_of(k_, a);
  m.grad_in[i] = m.recv_grad++;
  wait([&](const StopFn& stop) { ex_.grad_links_[c]->wait_arrived(m.grad_in[i], stop); });
}

void StageRunner::recompute(const Action& a, const MicroBatch& mb) {
  vk::Commands& cmd = begin(a);
  ex_.cells_[schedule_.cell_of(k_, a)]->forward(cmd, mb, std::nullopt, true);
  used(mb, submit(cmd));
}

void StageRunner::backward(const Action& a, const MicroBatch& mb) {
  Cursor& m = cursors_[a.cell];
  const uint32_t i = a.micro_batch, c = schedule_.cell_of(k_, a), C = ex_.cells();
  Cell& s = *ex_.cells_[c];
  vk::Commands& cmd = begin(a);
  if (m.first_backward) s.zero_gradients(cmd), m.first_backward = false;
  std::optional<vk::View> received;
  if (c + 1 < C) received = vk::View(ex_.grad_links_[c]->receive(m.grad_in[i]));
  // The cell's last backward of the step, with replicas: its gradients summed in buckets as
  // its layers finish (buckets.h), each bucket's piece submitted on its own.
  const bool sums = x_ == m.last_gradient && ex_.topology_->replicas() > 1;
  Cell::AfterLayer after;
  std::vector<Bucket> buckets;
  vk::Commands* piece = &cmd;  // what the rest of the backward is recorded into
  if (sums && ex_.options_.bucket_bytes > 0 && !schedule_.split) {
    buckets = plan_buckets(ex_.model_, s.layout().first, s.layout().last, ex_.options_.bucket_bytes);
    after = [&, next = size_t(0)](uint32_t l, vk::Commands& open) mutable -> vk::Commands& {
      if (next == buckets.size() || buckets[next].after != l) return open;
      sum_over_replicas(s, submit(open), buckets[next++].names);
      piece = &begin(a);
      return *piece;
    };
  }
  const std::optional<vk::View> dx = s.backward(cmd, mb, received, schedule_.split, after);
  if (c > 0) {
    Link& link = *ex_.grad_links_[c - 1];
    m.grad_out[i] = m.send_grad++;
    wait([&](const StopFn& stop) { link.wait_free(m.grad_out[i], stop); });
    piece->copy(*dx->buffer, link.send(m.grad_out[i]), dx->range, dx->offset, 0);
  }
  Executor::Shared::Norm& norm = ex_.shared_->norms[c];
  if (x_ == m.last_gradient && norm.in_backward) norm.reduce->record(*piece);
  m.bwd_value[i] = used(mb, submit(*piece));
  if (sums && !after) sum_over_replicas(s, m.bwd_value[i], s.trainable());  // one bucket
  if (c + 1 < C) ex_.grad_links_[c]->release(m.grad_in[i], dev_, m.bwd_value[i]);
}

void StageRunner::send_gradient(const Action& a) {
  const Cursor& m = cursors_[a.cell];
  const uint32_t i = a.micro_batch;
  ex_.grad_links_[schedule_.cell_of(k_, a) - 1]->post(m.grad_out[i], dev_, m.bwd_value[i],
                                                      to_string(a, schedule_.virtual_stages > 1));
}

void StageRunner::weight_gradient(const Action& a, const MicroBatch& mb) {
  const uint32_t c = schedule_.cell_of(k_, a);
  vk::Commands& cmd = begin(a);
  ex_.cells_[c]->backward_params(cmd, mb);
  Executor::Shared::Norm& norm = ex_.shared_->norms[c];
  if (x_ == cursors_[a.cell].last_gradient && norm.in_backward) norm.reduce->record(cmd);
  const uint64_t value = used(mb, submit(cmd));
  if (x_ == cursors_[a.cell].last_gradient && ex_.topology_->replicas() > 1)
    sum_over_replicas(*ex_.cells_[c], value, ex_.cells_[c]->trainable());
}

void StageRunner::sum_over_replicas(Cell& s, uint64_t value, const std::vector<std::string>& names) {
  if (!sums_) sums_ = std::make_unique<BucketSums>(ex_.topology_->replica_group());
  std::vector<vk::Buffer*> grads;
  for (const std::string& name : names) grads.push_back(&s.gradient(name));
  sums_->push(dev_, value, std::move(grads));
}

bool StageRunner::step(const Action& a) {
  while (!ex_.abort_.raised() && !dev_.wait_for(last_value_, 20'000'000)) {
  }
  if (ex_.abort_.raised()) return false;
  vk::Commands& cmd = begin(a);
  const double t0 = now_us(), c0 = cpu_us();
  const std::optional<double> grad_scale = step_sums();
  // The stages' sums and the norms' reduction on the host.
  waited_us_ += now_us() - t0, waited_cpu_us_ += cpu_us() - c0;
  if (!grad_scale || ex_.abort_.raised()) return false;
  if (update_.optimizer && !skipped_) {
    optim::Step st = update_.step;
    st.grad_scale = *grad_scale;
    update_.optimizer->record(cmd, st);  // every parameter on this stage's device
  }
  for (uint32_t v = 0; v < schedule_.virtual_stages; ++v) ex_.cells_[v * ex_.stages() + k_]->end_minibatch(cmd);
  submit(cmd);
  dev_.wait(last_value_);
  return true;
}

void StageRunner::finish() {
  // Every submission complete before its timestamps are read: a reused recording's query
  // reset runs on the device, so until then its queries still hold the last run's values
  // (SwiftShader starts a submission later than lavapipe does, and showed it), and the
  // caller reads results (the loss, the outputs) as soon as the stage threads return.
  if (last_value_) dev_.wait(last_value_);
  // GPU times of every action, on the host's clock.
  for (auto& [c, e] : recorded_) {
    if (dev_.info().timestamps) {
      const std::vector<double> ts = c->timestamps_ns();
      e.begin_us = ex_.clocks_[k_].host_at(ts.at(0));
      e.end_us = ex_.clocks_[k_].host_at(ts.at(1));
    } else {
      e.begin_us = e.end_us = e.submit_us;
    }
    ex_.state_->events[k_].push_back(e);
  }
}

}  // namespace brigade::pipeline
