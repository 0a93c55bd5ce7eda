#include "pipeline/executor.h"

#include <algorithm>
#include <barrier>
#include <cmath>
#include <map>
#include <numeric>
#include <thread>

#include "optim/clip.h"
#include "vk/check.h"

namespace brigade::pipeline {

namespace {

constexpr uint64_t kFloat = 4;
enum RelayRole { kActivation, kActivationFreed, kGradient, kGradientFreed, kRoles };

}  // namespace

// What a stage's thread waits for, advanced by relays: a boundary tensor arrived, or a link
// slot this stage writes was consumed on the other side. Values are transfer sequence
// numbers + 1.
struct Executor::Signals {
  Counter act_ready, act_free, grad_ready, grad_free;
  void jump() {
    for (Counter* c : {&act_ready, &act_free, &grad_ready, &grad_free}) c->advance(UINT64_MAX);
  }
};

struct Executor::Shared {
  std::unique_ptr<std::barrier<>> barrier;
  std::map<std::string, std::vector<uint32_t>> holders;      // parameter -> stages, in order
  std::map<std::string, std::vector<std::vector<float>>> tied;  // parameter -> per-stage gradient
  std::vector<double> squared;                                // per stage
  std::vector<std::vector<ActionEvent>> events;               // per stage
  std::vector<std::vector<std::unique_ptr<vk::Commands>>> ring;  // per stage, one per GPU action
  std::vector<uint32_t> rows;                                 // this mini-batch's micro-batches
  uint32_t total_rows = 0;
  double grad_norm = 0;  // written by stage 0's thread
  // Per stage: the reduction over the gradients it owns.
  struct Norm {
    std::unique_ptr<optim::GradNorm> reduce;
    std::unique_ptr<vk::Commands> commands;
    std::vector<std::string> names;  // of the reduced gradients, in order
    bool in_backward = false;        // recorded at the end of the stage's last backward
  };
  std::vector<Norm> norms;
  std::vector<std::string> bad;        // per stage: the deepest parameter with a non-finite gradient
  std::vector<std::string> bad_param;  // per stage, after a non-finite loss: the first non-finite parameter
  double loss = 0;               // this step's, written by the last stage's thread
};

Executor::Executor(const model::Model& model, std::vector<vk::Device*> devices, const Plan& plan,
                   ExecutorOptions options)
    : model_(model), devices_(std::move(devices)), plan_(plan), options_(options),
      shared_(std::make_unique<Shared>()) {
  const uint32_t K = uint32_t(plan_.stages.size());
  const uint32_t M = plan_.stages.at(0).micro_batches;
  if (devices_.size() != K)
    throw UserError("the plan has " + std::to_string(K) + " stages but " +
                    std::to_string(devices_.size()) + " devices were given");
  for (size_t a = 0; a < K; ++a)
    for (size_t b = a + 1; b < K; ++b)
      BRIGADE_EXPECT(devices_[a] != devices_[b], "one logical device per stage");
  if (options_.slots == 0) throw UserError("a link needs at least one slot");
  schedule_ = gpipe(K, M, options_.remat);
  eval_schedule_ = forward_only(K, M);
  for (const Schedule* s : {&schedule_, &eval_schedule_}) {
    const std::string problem = check(*s);
    BRIGADE_EXPECT(problem.empty(), "the schedule deadlocks: " + problem);
  }

  // Each boundary's path first: a forced path the pair cannot take is refused before any
  // stage allocates.
  if (options_.links.empty())
    for (uint32_t k = 0; k + 1 < K; ++k) options_.links.push_back(choose_link(*devices_[k], *devices_[k + 1], options_.link));
  BRIGADE_EXPECT(options_.links.size() + 1 == K, "one link choice per boundary");
  for (uint32_t k = 0; k < K; ++k) {
    stages_.push_back(std::make_unique<Stage>(*devices_[k], model_, plan_.stages[k]));
    signals_.push_back(std::make_unique<Signals>());
  }
  for (uint32_t k = 0; k + 1 < K; ++k) {
    const StageLayout& l = plan_.stages[k];
    const uint64_t bytes =
        model::elements(model_.layers[l.last - 1]->output_shape()) * l.max_rows * kFloat;
    const std::string name = "link " + std::to_string(k) + "->" + std::to_string(k + 1);
    const LinkKind kind = options_.links[k].kind;
    act_links_.push_back(std::make_unique<Link>(*devices_[k], *devices_[k + 1], bytes,
                                                options_.slots, kind, name + " activations"));
    grad_links_.push_back(std::make_unique<Link>(*devices_[k + 1], *devices_[k], bytes,
                                                 options_.slots, kind, name + " gradients"));
    for (int r = 0; r < kRoles; ++r)
      relays_.push_back(std::make_unique<Relay>(name + " relay " + std::to_string(r), abort_));
  }
  abort_.on_raise([this] {
    for (auto& t : signals_) t->jump();
  });

  // Which stages hold each parameter: more than one means tied across stages.
  for (uint32_t k = 0; k < K; ++k)
    for (const model::ParamSpec& p : plan_.stages[k].params) shared_->holders[p.name].push_back(k);
  shared_->squared.assign(K, 0.0);
  shared_->norms.resize(K);
  for (uint32_t k = 0; k < K; ++k) {
    // The gradients this stage owns (a tied one counts once, on its first holder). A stage
    // holding no tied parameter reduces them in its last backward submission; one that does
    // must wait for the host to sum the copies, and reduces them in a submission of its own.
    Shared::Norm& norm = shared_->norms[k];
    std::vector<vk::View> grads;
    norm.in_backward = true;
    for (const std::string& name : stages_[k]->trainable()) {
      const std::vector<uint32_t>& holders = shared_->holders.at(name);
      if (holders.size() > 1) norm.in_backward = false;
      if (holders.front() == k) grads.emplace_back(stages_[k]->gradient(name)), norm.names.push_back(name);
    }
    norm.reduce = std::make_unique<optim::GradNorm>(*devices_[k], std::move(grads));
    if (!norm.in_backward)
      norm.commands = std::make_unique<vk::Commands>(*devices_[k], "stage " + std::to_string(k) + " gradient norm");
  }
  shared_->bad.resize(K);
  shared_->bad_param.resize(K);
  shared_->events.resize(K);
  shared_->ring.resize(K);
  for (uint32_t k = 0; k < K; ++k) {
    size_t gpu_actions = 0;
    for (const Action& a : schedule_.actions[k])
      gpu_actions += a.op == Op::Forward || a.op == Op::Recompute || a.op == Op::Backward || a.op == Op::Step;
    for (size_t i = 0; i < gpu_actions; ++i)
      shared_->ring[k].push_back(std::make_unique<vk::Commands>(
          *devices_[k], "stage " + std::to_string(k) + " action " + std::to_string(i)));
  }
  // Every parameter, gradient and statistics accumulator starts at zero.
  for (uint32_t k = 0; k < K; ++k) {
    vk::Commands c(*devices_[k], "stage " + std::to_string(k) + " zero");
    for (const model::ParamSpec& p : plan_.stages[k].params) c.fill(stages_[k]->param(p.name));
    stages_[k]->zero_gradients(c);
    c.run();
  }
  calibrate();
}

Executor::~Executor() {
  // Relays finish before the links and timelines they use go away.
  relays_.clear();
}

void Executor::calibrate() {
  for (uint32_t k = 0; k < stages(); ++k) {
    vk::Device& dev = *devices_[k];
    if (!dev.info().timestamps) {
      clock_offset_us_.push_back(0);
      continue;
    }
    vk::Commands c(dev, "clock calibration");
    c.timestamp();
    const double before = now_us();
    c.run();
    const double after = now_us();
    clock_offset_us_.push_back((before + after) / 2 - c.timestamps_ns().at(0) / 1000.0);
  }
}

void Executor::initialize_parameters(uint64_t seed) {
  for (const model::ParamSpec& spec : model_.params())
    if (spec.kind != model::ParamKind::State) set_parameter(spec.name, model::initial_values(spec, seed));
}

void Executor::set_parameter(const std::string& name, const std::vector<float>& values) {
  auto it = shared_->holders.find(name);
  if (it == shared_->holders.end()) throw UserError("the model has no parameter '" + name + "'");
  for (uint32_t k : it->second) {
    vk::Buffer& b = stages_[k]->param(name);
    if (values.size() * kFloat != b.size())
      throw UserError("parameter '" + name + "' has " + std::to_string(b.size() / kFloat) +
                      " elements, " + std::to_string(values.size()) + " were given");
    vk::upload(b, values.data(), b.size());
  }
}

std::vector<std::vector<float>> Executor::parameter_copies(const std::string& name) const {
  auto it = shared_->holders.find(name);
  if (it == shared_->holders.end()) throw UserError("the model has no parameter '" + name + "'");
  std::vector<std::vector<float>> out;
  for (uint32_t k : it->second) {
    const vk::Buffer& b = stages_[k]->param(name);
    std::vector<float> v(b.size() / kFloat);
    vk::download(b, v.data(), b.size());
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<float> Executor::parameter(const std::string& name) const {
  return parameter_copies(name).front();
}

std::vector<float> Executor::gradient(const std::string& name) const {
  auto it = shared_->holders.find(name);
  if (it == shared_->holders.end() || !stages_[it->second.front()]->holds(name))
    throw UserError("the model has no parameter '" + name + "'");
  Stage& s = *stages_[it->second.front()];
  const vk::Buffer& b = s.gradient(name);
  std::vector<float> v(b.size() / kFloat);
  vk::download(b, v.data(), b.size());
  return v;
}

void Executor::attach(optim::Optimizer& optimizer) {
  for (auto& s : stages_)
    for (const std::string& name : s->trainable()) optimizer.add(name, s->param(name), s->gradient(name));
}

StepResult Executor::train(const Batch& batch, const Update& update) {
  run(schedule_, batch, update, nullptr);
  StepResult result;
  float loss = 0;
  vk::download(stages_.back()->loss(), &loss, kFloat);
  result.loss = loss;
  result.grad_norm = shared_->grad_norm;
  const uint32_t K = stages();
  result.trace.stages = K, result.trace.micro_batches = schedule_.micro_batches;
  for (auto& e : shared_->events) result.trace.actions.insert(result.trace.actions.end(), e.begin(), e.end());
  for (uint32_t b = 0; b + 1 < K; ++b)
    for (int r : {kActivation, kGradient}) {
      const bool forward = r == kActivation;
      for (Transfer& t : relays_[b * kRoles + r]->take_transfers())
        result.trace.transfers.push_back({forward ? b : b + 1, forward ? b + 1 : b, std::move(t)});
    }
  for (uint32_t b = 0; b + 1 < K; ++b)
    for (int r : {kActivationFreed, kGradientFreed}) relays_[b * kRoles + r]->take_transfers();
  return result;
}

EvalResult Executor::evaluate(const Batch& batch, std::vector<float>* outputs) {
  if (outputs)
    outputs->assign(uint64_t(batch.rows) * model::elements(model_.layers.back()->output_shape()), 0.0f);
  run(eval_schedule_, batch, Update{}, outputs);
  for (auto& r : relays_) r->take_transfers();
  float loss = 0;
  uint32_t correct = 0;
  vk::download(stages_.back()->loss(), &loss, sizeof loss);
  vk::download(stages_.back()->correct(), &correct, sizeof correct);
  return EvalResult{loss, correct};
}

void Executor::run(const Schedule& schedule, const Batch& batch, const Update& update,
                   std::vector<float>* outputs) {
  if (broken_) throw UserError("the pipeline stopped after an earlier failure");
  const uint32_t K = stages(), M = schedule.micro_batches;
  const uint64_t in = model::elements(model_.input);
  const uint32_t N = std::accumulate(plan_.micro_rows.begin(), plan_.micro_rows.end(), 0u);
  if (batch.rows < M || batch.rows > N)
    throw UserError("a mini-batch of " + std::to_string(batch.rows) + " samples; this pipeline " +
                    "was planned for " + std::to_string(M) + " to " + std::to_string(N));
  const size_t inputs = model_.token_input ? batch.tokens.size() : batch.images.size();
  if (inputs != batch.rows * in || batch.targets.size() != uint64_t(batch.rows) * model_.targets_per_sample)
    throw UserError("the batch holds " + std::to_string(inputs) + " inputs and " +
                    std::to_string(batch.targets.size()) + " targets for " +
                    std::to_string(batch.rows) + " samples; the model expects " +
                    std::to_string(in) + " and " + std::to_string(model_.targets_per_sample) +
                    " per sample");
  shared_->rows = split_rows(batch.rows, M);
  shared_->total_rows = batch.rows;
  shared_->grad_norm = 0;
  shared_->tied.clear();
  for (auto& [name, holders] : shared_->holders)
    if (holders.size() > 1) shared_->tied[name].resize(K);
  shared_->barrier = std::make_unique<std::barrier<>>(K);
  for (auto& e : shared_->events) e.clear();

  std::vector<std::thread> threads;
  for (uint32_t k = 0; k < K; ++k)
    threads.emplace_back([&, k] { run_stage(k, schedule, batch, update, outputs); });
  for (auto& t : threads) t.join();
  for (auto& r : relays_) r->drain();
  if (abort_.raised()) {
    broken_ = true;
    abort_.rethrow();
  }
  ++forward_runs_;
  if (schedule.training) ++backward_runs_;
}

void Executor::run_stage(uint32_t k, const Schedule& schedule, const Batch& batch,
                         const Update& update, std::vector<float>* outputs) {
  try {
    const uint32_t K = stages(), M = schedule.micro_batches, S = options_.slots;
    const bool training = schedule.training;
    const uint32_t step_index = uint32_t(update.step.t);
    Stage& s = *stages_[k];
    vk::Device& dev = *devices_[k];
    Signals& T = *signals_[k];
    // Transfer sequence numbers of this mini-batch start here.
    uint64_t recv_act = forward_runs_ * M, send_act = recv_act;
    uint64_t recv_grad = backward_runs_ * M, send_grad = recv_grad;
    std::vector<uint64_t> act_in(M), act_out(M), grad_in(M), grad_out(M), fwd_value(M), bwd_value(M);
    // A stage thread waits on the host for a relay's word before the submission that needs
    // it, so no device queue ever holds a submission waiting on another device.
    double waited_us = 0;  // host time blocked in waits and the step's barrier, kept out of record_us
    auto wait_for = [&](Counter& c, uint64_t value) {
      const double t0 = now_us();
      c.wait(value, [&] { return abort_.raised(); });
      waited_us += now_us() - t0;
    };
    size_t next_cmd = 0;
    bool first_forward = true, first_backward = true;
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
      ActionEvent e{k, to_string(a)};
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
    auto micro = [&](uint32_t i) {
      return MicroBatch{i, shared_->rows[i], shared_->total_rows, step_index, training};
    };

    const Action* last_backward = nullptr;
    for (const Action& a : schedule.actions[k])
      if (a.op == Op::Backward) last_backward = &a;
    for (const Action& a : schedule.actions[k]) {
      if (abort_.raised()) return;
      const uint32_t i = a.micro_batch;
      switch (a.op) {
        case Op::RecvActivation:
          act_in[i] = recv_act++;
          wait_for(T.act_ready, act_in[i] + 1);
          break;
        case Op::Forward: {
          const MicroBatch mb = micro(i);
          uint64_t first_row = 0;
          for (uint32_t j = 0; j < i; ++j) first_row += shared_->rows[j];
          if (s.layout().first_stage) {
            const uint64_t n = model::elements(model_.input) * mb.rows;
            const void* src = model_.token_input ? static_cast<const void*>(batch.tokens.data() + first_row * model::elements(model_.input))
                                                 : static_cast<const void*>(batch.images.data() + first_row * model::elements(model_.input));
            vk::upload(s.input(i), src, n * kFloat);
          }
          if (s.layout().last_stage) {
            const uint64_t tps = model_.targets_per_sample;
            vk::upload(s.targets(i), batch.targets.data() + first_row * tps, mb.rows * tps * kFloat);
          }
          vk::Commands& c = begin(a);
          if (first_forward) s.zero_loss(c), first_forward = false;
          std::optional<vk::View> received;
          if (k > 0) received = vk::View(act_links_[k - 1]->receive(act_in[i] % S));
          const vk::View out = s.forward(c, mb, received, false);
          if (k + 1 < K) {
            act_out[i] = send_act++;
            if (act_out[i] >= S) wait_for(T.act_free, act_out[i] - S + 1);
            c.copy(*out.buffer, act_links_[k]->send(act_out[i] % S), out.range, out.offset, 0);
          }
          if (!training && s.layout().last_stage) s.count_correct(c, mb);
          fwd_value[i] = submit(c);
          if (outputs && s.layout().last_stage) {
            dev.wait(fwd_value[i]);
            const uint64_t per_row = model::elements(model_.layers.back()->output_shape());
            vk::download(*out.buffer, outputs->data() + first_row * per_row, out.range, out.offset);
          }
          if (k > 0)
            relays_[(k - 1) * kRoles + kActivationFreed]->push(
                {"free", &dev, fwd_value[i], {}, 0, &signals_[k - 1]->act_free, act_in[i] + 1});
          break;
        }
        case Op::SendActivation: {
          Link* link = act_links_[k].get();
          const uint32_t slot = uint32_t(act_out[i] % S);
          relays_[k * kRoles + kActivation]->push(
              {to_string(a), &dev, fwd_value[i], [link, slot] { return link->relay(slot); },
               act_links_[k]->bytes(), &signals_[k + 1]->act_ready, act_out[i] + 1});
          break;
        }
        case Op::RecvGradient:
          grad_in[i] = recv_grad++;
          wait_for(T.grad_ready, grad_in[i] + 1);
          break;
        case Op::Recompute: {
          vk::Commands& c = begin(a);
          s.forward(c, micro(i), std::nullopt, true);
          submit(c);
          break;
        }
        case Op::Backward: {
          vk::Commands& c = begin(a);
          if (first_backward) s.zero_gradients(c), first_backward = false;
          std::optional<vk::View> received;
          if (k + 1 < K) received = vk::View(grad_links_[k]->receive(grad_in[i] % S));
          const std::optional<vk::View> dx = s.backward(c, micro(i), received);
          if (k > 0) {
            grad_out[i] = send_grad++;
            if (grad_out[i] >= S) wait_for(T.grad_free, grad_out[i] - S + 1);
            c.copy(*dx->buffer, grad_links_[k - 1]->send(grad_out[i] % S), dx->range, dx->offset, 0);
          }
          if (&a == last_backward && shared_->norms[k].in_backward) shared_->norms[k].reduce->record(c);
          bwd_value[i] = submit(c);
          if (k + 1 < K)
            relays_[k * kRoles + kGradientFreed]->push(
                {"free", &dev, bwd_value[i], {}, 0, &signals_[k + 1]->grad_free, grad_in[i] + 1});
          break;
        }
        case Op::SendGradient: {
          Link* link = grad_links_[k - 1].get();
          const uint32_t slot = uint32_t(grad_out[i] % S);
          relays_[(k - 1) * kRoles + kGradient]->push(
              {to_string(a), &dev, bwd_value[i], [link, slot] { return link->relay(slot); },
               link->bytes(), &signals_[k - 1]->grad_ready, grad_out[i] + 1});
          break;
        }
        case Op::Step: {
          while (!abort_.raised() && !dev.wait_for(last_value, 20'000'000)) {
          }
          if (abort_.raised()) return;
          vk::Commands& c = begin(a);
          const double t0 = now_us();
          const std::optional<double> grad_scale = step_stage(k, update);
          waited_us += now_us() - t0;  // the stages' barrier and the norms' reduction on the host
          if (!grad_scale || abort_.raised()) return;
          if (update.optimizer) {
            optim::Step st = update.step;
            st.grad_scale = *grad_scale;
            update.optimizer->record(c, st);
          }
          s.end_minibatch(c);
          submit(c);
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
    if (shared_->barrier) shared_->barrier->arrive_and_drop();
  }
}

// The host part of the Step action: gradients of parameters tied across stages are summed
// (in stage order, so every copy gets the same bits); every stage reduces its gradients to
// squared norms, which both clip (summed in stage order into the global coefficient) and
// check that the loss and every gradient are finite. A step with anything non-finite
// updates nothing: the deepest stage with a problem throws NonFinite, the others skip.
std::optional<double> Executor::step_stage(uint32_t k, const Update& update) {
  Stage& s = *stages_[k];
  Shared& sh = *shared_;
  if (!sh.tied.empty()) {  // parameters held by more than one stage
    const auto& mine = s.trainable();
    for (auto& [name, copies] : sh.tied) {
      if (std::find(mine.begin(), mine.end(), name) == mine.end()) continue;
      copies[k].resize(s.gradient(name).size() / kFloat);
      vk::download(s.gradient(name), copies[k].data(), s.gradient(name).size());
    }
    sh.barrier->arrive_and_wait();
    if (abort_.raised()) return std::nullopt;
    for (auto& [name, copies] : sh.tied) {
      if (copies[k].empty()) continue;
      std::vector<float> sum(copies[k].size(), 0.0f);
      for (uint32_t j : sh.holders.at(name))
        for (size_t e = 0; e < sum.size(); ++e) sum[e] += copies[j][e];
      vk::upload(s.gradient(name), sum.data(), sum.size() * kFloat);
    }
  }
  Shared::Norm& norm = sh.norms[k];
  if (!norm.in_backward) {
    norm.commands->reset();
    norm.reduce->record(*norm.commands);
    norm.commands->run();
  }
  std::vector<double> each;
  sh.squared[k] = norm.reduce->squared(&each);
  sh.bad[k].clear();
  sh.bad_param[k].clear();
  for (size_t i = each.size(); i-- > 0;)  // the deepest first: backward reaches it first
    if (!std::isfinite(each[i])) {
      sh.bad[k] = norm.names[i];
      break;
    }
  if (s.layout().last_stage) {
    float loss = 0;
    vk::download(s.loss(), &loss, kFloat);
    sh.loss = loss;
  }
  sh.barrier->arrive_and_wait();
  if (abort_.raised()) return std::nullopt;
  const uint32_t K = stages();
  if (!std::isfinite(sh.loss)) {  // every stage sees it: look for a parameter that already was
    sh.bad_param[k] = first_non_finite_parameter(k);
    sh.barrier->arrive_and_wait();
    if (abort_.raised()) return std::nullopt;
  }
  // Who reports: the shallowest stage with a non-finite parameter, else the deepest with a
  // non-finite gradient, else the last (the loss alone).
  int culprit = -1;
  for (uint32_t j = K; j-- > 0;)
    if (!sh.bad_param[j].empty()) culprit = int(j);
  for (uint32_t j = 0; j < K && culprit < 0; ++j)
    if (!sh.bad[K - 1 - j].empty()) culprit = int(K - 1 - j);
  if (culprit < 0 && !std::isfinite(sh.loss)) culprit = int(K - 1);
  if (culprit >= 0) {
    if (uint32_t(culprit) == k) throw NonFinite(non_finite_message(k, update.step.t));
    return std::nullopt;
  }
  double total = 0;
  for (double v : sh.squared) total += v;  // in stage order: every stage gets the same bits
  if (k == 0) sh.grad_norm = std::sqrt(total);
  if (update.max_norm > 0) return optim::clip(total, update.max_norm).grad_scale;
  return 1.0;
}

std::string Executor::first_non_finite_parameter(uint32_t k) {
  Stage& s = *stages_[k];
  std::vector<vk::View> params;
  std::vector<std::string> names;
  for (uint32_t l = s.layout().first; l < s.layout().last; ++l)
    for (const model::ParamSpec& p : model_.layers[l]->params())
      if (p.kind != model::ParamKind::State) params.emplace_back(s.param(p.name)), names.push_back(p.name);
  optim::GradNorm norm(s.device(), params);
  vk::Commands c(s.device(), "stage " + std::to_string(k) + " parameter check");
  norm.record(c);
  c.run();
  std::vector<double> each;
  norm.squared(&each);
  for (size_t i = 0; i < each.size(); ++i)
    if (!std::isfinite(each[i])) return names[i];
  return {};
}

std::string Executor::non_finite_message(uint32_t k, uint64_t step) const {
  const Shared& sh = *shared_;
  const StageLayout& l = plan_.stages[k];
  const std::string where = "stage " + std::to_string(k) + " (device " + std::to_string(devices_[k]->info().index) +
                            ", " + devices_[k]->info().name + ")";
  auto layer_of = [&](const std::string& name) {
    for (uint32_t i = l.first; i < l.last; ++i)
      for (const model::ParamSpec& p : model_.layers[i]->params())
        if (p.name == name) return "layer " + std::to_string(i) + ", " + model_.layers[i]->kind();
    return std::string("layer ?");
  };
  std::string what = "step " + std::to_string(step) + ": ";
  if (!std::isfinite(sh.loss)) what += "the loss is " + std::string(std::isnan(sh.loss) ? "NaN" : "infinite") + "; ";
  if (!sh.bad_param[k].empty())
    what += "parameter '" + sh.bad_param[k] + "' (" + layer_of(sh.bad_param[k]) + ", on " + where +
            ") was already not finite";
  else if (!sh.bad[k].empty())
    what += "the gradient of '" + sh.bad[k] + "' (" + layer_of(sh.bad[k]) + ", on " + where +
            ") has a non-finite norm, the deepest such layer";
  else
    what += "every parameter and gradient is finite, so the forward pass overflowed (the last layer, " +
            std::to_string(l.last - 1) + ", " + model_.layers[l.last - 1]->kind() + ", is on " + where + ")";
  return what + "; no parameter was updated";
}

}  // namespace brigade::pipeline
