// One stage thread's walk through its schedule: the cells' forward, backward and deferred
// parameter-gradient actions, the transfers across its links, and the Step, for one run of
// Executor::run.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "optim/clip.h"
#include "pipeline/executor.h"
#include "pipeline/executor_shared.h"
#include "pipeline/process_link.h"
#include "vk/check.h"

namespace brigade::pipeline {

void Executor::run_stage(uint32_t k, const Schedule& schedule, const Batch& batch,
                         const Update& update, std::vector<float>* outputs, Group& pipeline) {
  try {
    const uint32_t K = stages(), C = cells(), V = schedule.virtual_stages;
    const uint32_t M = schedule.micro_batches;
    const bool training = schedule.training;
    const Slots& slots = training ? slots_ : eval_slots_;
    const uint32_t step_index = uint32_t(update.step.t);
    const uint32_t first_index = options_.ranks ? options_.ranks->replica * M : 0;  // random keys
    vk::Device& dev = *devices_[k];
    // Per cell of this stage (v = 0..V-1): transfer sequence numbers, which start here for
    // this mini-batch, and per micro-batch the numbers it took and its submissions' values.
    struct Cell {
      uint64_t recv_act = 0, send_act = 0, recv_grad = 0, send_grad = 0;
      std::vector<uint64_t> act_in, act_out, grad_in, grad_out, fwd_value, bwd_value;
      std::vector<uint64_t> input_used;  // per input slot: the last submission reading it
      bool first_forward = true, first_backward = true;
      size_t last_gradient = SIZE_MAX;  // the action after which the gradients are complete
    };
    std::vector<Cell> mine(V);
    for (Cell& m : mine) {
      m.recv_act = m.send_act = forward_runs_ * M;
      m.recv_grad = m.send_grad = backward_runs_ * M;
      for (auto* v : {&m.act_in, &m.act_out, &m.grad_in, &m.grad_out, &m.fwd_value, &m.bwd_value}) v->assign(M, 0);
    }
    const std::vector<Action>& actions = schedule.actions[k];
    for (size_t x = 0; x < actions.size(); ++x)
      if (actions[x].op == Op::Backward || actions[x].op == Op::WeightGradient) mine[actions[x].cell].last_gradient = x;
    // A stage thread waits on the host for a relay's word before the submission that needs
    // it, so no device queue ever holds a submission waiting on another device.
    double waited_us = 0;  // host time blocked in waits and the step's barrier, kept out of record_us
    const StopFn stop = [this] { return abort_.raised(); };
    auto waited = [&](double t0) { waited_us += now_us() - t0; };
    size_t next_cmd = 0;
    std::vector<std::pair<vk::Commands*, ActionEvent>> recorded;
    uint64_t last_value = 0;

    // The action being recorded (one at a time): its start, less the waits so far, and its
    // Commands' counts then; submit() turns them into the action's own.
    struct {
      double start_us = 0;
      uint32_t dispatches = 0, barriers = 0;
    } open;
    auto begin = [&](const Action& a) -> vk::Commands& {
      vk::Commands& c = *shared_->ring[k].at(next_cmd++);
      open = {now_us() - waited_us, c.dispatches(), c.barriers()};
      ActionEvent e{k, to_string(a, V > 1)};
      c.reset();
      c.after_earlier_submissions();
      if (dev.info().timestamps) c.timestamp();
      recorded.push_back({&c, e});
      return c;
    };
    auto submit = [&](vk::Commands& c) {
      if (dev.info().timestamps) c.timestamp();
      ActionEvent& e = recorded.back().second;
      e.submit_us = now_us();
      e.record_us = e.submit_us - waited_us - open.start_us;
      e.dispatches = c.dispatches() - open.dispatches, e.barriers = c.barriers() - open.barriers;
      if (abort_.raised()) throw UserError("stopped: another stage failed");
      last_value = c.submit();
      return last_value;
    };

    for (size_t x = 0; x < actions.size(); ++x) {
      if (abort_.raised()) return;
      const Action& a = actions[x];
      const uint32_t i = a.micro_batch, c = schedule.cell_of(k, a);
      Cell& m = mine[a.cell];
      Stage& s = *cells_[c];
      const MicroBatch mb{first_index + i, slots.input[k][x], slots.set[k][x], slots.deferred[k][x],
                          i < M ? shared_->rows[i] : 0, shared_->total_rows, step_index, training};
      auto used = [&](uint64_t value) {
        if (mb.input != Slots::kNone) m.input_used.resize(std::max<size_t>(m.input_used.size(), mb.input + 1)), m.input_used[mb.input] = value;
        return value;
      };
      switch (a.op) {
        case Op::RecvActivation: {
          m.act_in[i] = m.recv_act++;
          const double t0 = now_us();
          act_links_[c - 1]->wait_arrived(m.act_in[i], stop);
          waited(t0);
          break;
        }
        case Op::Forward: {
          uint64_t first_row = shared_->first_row;
          for (uint32_t j = 0; j < i; ++j) first_row += shared_->rows[j];
          // The host writes the kept input: whatever read that slot before must be done.
          if ((s.layout().first_stage || s.layout().last_stage) && mb.input < m.input_used.size() && m.input_used[mb.input])
            dev.wait(m.input_used[mb.input]);
          if (s.layout().first_stage) {
            const uint64_t n = model::elements(model_.input) * mb.rows;
            const void* src = model_.token_input ? static_cast<const void*>(batch.tokens.data() + first_row * model::elements(model_.input))
                                                 : static_cast<const void*>(batch.images.data() + first_row * model::elements(model_.input));
            vk::upload(s.input(mb.input), src, n * kFloat);
          }
          if (s.layout().last_stage) {
            const uint64_t tps = model_.targets_per_sample;
            vk::upload(s.targets(mb.input), batch.targets.data() + first_row * tps, mb.rows * tps * kFloat);
          }
          vk::Commands& cmd = begin(a);
          if (m.first_forward) s.zero_loss(cmd), m.first_forward = false;
          std::optional<vk::View> received;
          if (c > 0) received = vk::View(act_links_[c - 1]->receive(m.act_in[i]));
          const vk::View out = s.forward(cmd, mb, received, false);
          if (c + 1 < C) {
            m.act_out[i] = m.send_act++;
            const double t0 = now_us();
            act_links_[c]->wait_free(m.act_out[i], stop);
            waited(t0);
            cmd.copy(*out.buffer, act_links_[c]->send(m.act_out[i]), out.range, out.offset, 0);
          }
          if (!training && s.layout().last_stage) s.count_correct(cmd, mb);
          m.fwd_value[i] = used(submit(cmd));
          if (outputs && s.layout().last_stage) {
            dev.wait(m.fwd_value[i]);
            const uint64_t per_row = model::elements(model_.layers.back()->output_shape());
            vk::download(*out.buffer, outputs->data() + first_row * per_row, out.range, out.offset);
          }
          if (c > 0) act_links_[c - 1]->release(m.act_in[i], dev, m.fwd_value[i]);
          break;
        }
        case Op::SendActivation:
          act_links_[c]->post(m.act_out[i], dev, m.fwd_value[i], to_string(a, V > 1));
          break;
        case Op::RecvGradient: {
          m.grad_in[i] = m.recv_grad++;
          const double t0 = now_us();
          grad_links_[c]->wait_arrived(m.grad_in[i], stop);
          waited(t0);
          break;
        }
        case Op::Recompute: {
          vk::Commands& cmd = begin(a);
          s.forward(cmd, mb, std::nullopt, true);
          used(submit(cmd));
          break;
        }
        case Op::Backward: {
          vk::Commands& cmd = begin(a);
          if (m.first_backward) s.zero_gradients(cmd), m.first_backward = false;
          std::optional<vk::View> received;
          if (c + 1 < C) received = vk::View(grad_links_[c]->receive(m.grad_in[i]));
          const std::optional<vk::View> dx = s.backward(cmd, mb, received, schedule.split);
          if (c > 0) {
            m.grad_out[i] = m.send_grad++;
            const double t0 = now_us();
            grad_links_[c - 1]->wait_free(m.grad_out[i], stop);
            waited(t0);
            cmd.copy(*dx->buffer, grad_links_[c - 1]->send(m.grad_out[i]), dx->range, dx->offset, 0);
          }
          if (x == m.last_gradient && shared_->norms[c].in_backward) shared_->norms[c].reduce->record(cmd);
          m.bwd_value[i] = used(submit(cmd));
          if (c + 1 < C) grad_links_[c]->release(m.grad_in[i], dev, m.bwd_value[i]);
          break;
        }
        case Op::SendGradient:
          grad_links_[c - 1]->post(m.grad_out[i], dev, m.bwd_value[i], to_string(a, V > 1));
          break;
        case Op::WeightGradient: {
          vk::Commands& cmd = begin(a);
          s.backward_params(cmd, mb);
          if (x == m.last_gradient && shared_->norms[c].in_backward) shared_->norms[c].reduce->record(cmd);
          used(submit(cmd));
          break;
        }
        case Op::Step: {
          while (!abort_.raised() && !dev.wait_for(last_value, 20'000'000)) {
          }
          if (abort_.raised()) return;
          vk::Commands& cmd = begin(a);
          const double t0 = now_us();
          const std::optional<double> grad_scale = step_stage(k, update, pipeline);
          waited_us += now_us() - t0;  // the stages' barrier and the norms' reduction on the host
          if (!grad_scale || abort_.raised()) return;
          if (update.optimizer) {
            optim::Step st = update.step;
            st.grad_scale = *grad_scale;
            update.optimizer->record(cmd, st);  // every parameter on this stage's device
          }
          for (uint32_t v = 0; v < V; ++v) cells_[v * K + k]->end_minibatch(cmd);
          submit(cmd);
          dev.wait(last_value);
          break;
        }
      }
    }
    // Every submission complete before its timestamps are read: a reused recording's query
    // reset runs on the device, so until then its queries still hold the last run's values
    // (SwiftShader starts a submission later than lavapipe does, and showed it), and the
    // caller reads results (the loss, the outputs) as soon as the stage threads return.
    if (last_value) dev.wait(last_value);
    // GPU times of every action, on the host's clock.
    const double offset = clock_offset_us_[k];
    for (auto& [c, e] : recorded) {
      if (dev.info().timestamps) {
        const std::vector<double> ts = c->timestamps_ns();
        e.begin_us = ts.at(0) / 1000.0 + offset;
        e.end_us = ts.at(1) / 1000.0 + offset;
      } else {
        e.begin_us = e.end_us = e.submit_us;
      }
      shared_->events[k].push_back(e);
    }
  } catch (...) {
    abort_.raise(std::current_exception());
    shared_->threads->barrier.arrive_and_drop();
  }
}

}  // namespace brigade::pipeline
