#include "pipeline/executor.h"
#include "pipeline/executor_shared.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <thread>

#include "optim/clip.h"
#include "pipeline/process_link.h"
#include "pipeline/stage_runner.h"
#include "util/error.h"

namespace brigade::pipeline {

std::vector<LinkChoice> choose_links(const std::vector<vk::Device*>& devices, uint32_t cells,
                                     LinkKind requested) {
  const uint32_t K = uint32_t(devices.size());
  std::map<std::pair<uint32_t, uint32_t>, LinkChoice> by_pair;  // each pair of devices probed once
  std::vector<LinkChoice> out;
  for (uint32_t b = 0; b + 1 < cells; ++b) {
    const std::pair<uint32_t, uint32_t> pair{b % K, (b + 1) % K};
    if (!devices[pair.first] || !devices[pair.second]) {
      if (requested != LinkKind::Auto)
        throw UserError("`link` " + std::string(link_name(requested)) + ": cells " + std::to_string(b) + " and " +
                        std::to_string(b + 1) + " run in different processes, whose boundaries travel as MPI "
                        "messages; use `link` auto");
      out.push_back({LinkKind::Mpi, "another process: MPI messages from and into mapped memory"});
      continue;
    }
    auto it = by_pair.find(pair);
    if (it == by_pair.end())
      it = by_pair.emplace(pair, choose_link(*devices[pair.first], *devices[pair.second], requested)).first;
    out.push_back(it->second);
  }
  return out;
}

Executor::Executor(const model::Model& model, std::vector<vk::Device*> devices, const Plan& plan,
                   ExecutorOptions options, std::unique_ptr<Topology> topology)
    : model_(model), devices_(std::move(devices)), plan_(plan), options_(options),
      topology_(topology ? std::move(topology) : std::make_unique<OneProcess>(uint32_t(devices_.size()))),
      schedule_(plan_.schedule), shared_(std::make_unique<Shared>()), state_(std::make_unique<RunState>()) {
  check_devices();
  lay_out_slots();
  // Each boundary's path first: a forced path the pair cannot take is refused before any
  // cell allocates.
  const uint32_t K = stages(), C = schedule_.cells();
  if (options_.links.empty()) options_.links = choose_links(devices_, C, options_.link);
  BRIGADE_EXPECT(options_.links.size() + 1 == C, "one link choice per boundary");
  for (uint32_t c = 0; c < C; ++c)
    cells_.push_back(devices_[c % K] ? std::make_unique<Cell>(*devices_[c % K], model_, plan_.cells[c]) : nullptr);
  build_links();
  build_norms();
  build_ring();
  state_->events.resize(K);
  state_->bad.resize(C);
  state_->bad_param.resize(C);
  zero_state();
  calibrate();
}

Executor::~Executor() {
  // After a failure a stage may have left work queued: it finishes before what it uses is
  // freed (the links' relays still running, for work that waits on them). The recordings wait
  // for their own work as they go (vk::Commands), however long a device takes over it, before
  // the links whose memory that work may still write into.
  for (vk::Device* d : devices_)
    if (d) d->settle(5'000'000'000ull);
  shared_.reset();
  // Links (their relay threads, their messages) finish before the devices they use go away.
  act_links_.clear();
  grad_links_.clear();
}

void Executor::check_devices() {
  const uint32_t K = schedule_.stages;
  BRIGADE_EXPECT(plan_.cells.size() == schedule_.cells(), "the plan lays out one cell per stage and virtual stage");
  if (devices_.size() != K)
    throw UserError("the plan has " + std::to_string(K) + " stages but " +
                    std::to_string(devices_.size()) + " devices were given");
  BRIGADE_EXPECT(topology_->stages() == K, "the topology places every stage of the plan");
  for (size_t a = 0; a < K; ++a) {
    BRIGADE_EXPECT((devices_[a] != nullptr) == topology_->local(uint32_t(a)),
                   "a device for every stage this process runs, and only for those");
    for (size_t b = a + 1; b < K; ++b)
      BRIGADE_EXPECT(!devices_[a] || devices_[a] != devices_[b], "one logical device per stage");
  }
  const uint32_t boundaries = schedule_.cells() - 1, most = topology_->max_boundaries(options_.slots);
  if (most && boundaries > most)
    throw UserError(std::to_string(schedule_.cells()) + " cells have " + std::to_string(boundaries) +
                    " boundaries between them; the processes can tell the transfers of at most " +
                    std::to_string(most) + " apart: use fewer virtual stages");
}

void Executor::lay_out_slots() {
  if (options_.slots == 0) throw UserError("a link needs at least one slot");
  eval_schedule_ = forward_only(schedule_);
  const std::string problem = check(schedule_, options_.slots);
  BRIGADE_EXPECT(problem.empty(), "the schedule deadlocks: " + problem);
  slots_ = plan_.slots;
  eval_slots_ = eval_slots(eval_schedule_);
  for (uint32_t c = 0; c < schedule_.cells(); ++c)
    BRIGADE_EXPECT(slots_.inputs[c] <= plan_.cells[c].inputs && slots_.sets[c] <= plan_.cells[c].sets &&
                       slots_.deferreds[c] <= plan_.cells[c].deferreds,
                   "the plan keeps the buffers its schedule uses");
}

Slots Executor::eval_slots(const Schedule& eval) const {
  const std::string problem = check(eval, options_.slots);
  BRIGADE_EXPECT(problem.empty(), "the schedule deadlocks: " + problem);
  Slots out = assign_slots(eval);
  // An evaluation's input lives only through its own Forward, so one slot would do; but the
  // host writes the first cell's inputs (and the last's targets) and must first wait for the
  // slot's last reader. Taking the slots the training layout has in turn keeps that wait off
  // the common path.
  for (uint32_t k = 0; k < eval.stages; ++k)
    for (size_t x = 0; x < eval.actions[k].size(); ++x) {
      const Action& a = eval.actions[k][x];
      if (a.op == Op::Forward) out.input[k][x] = a.micro_batch % plan_.cells[eval.cell_of(k, a)].inputs;
    }
  for (uint32_t c = 0; c < eval.cells(); ++c)
    BRIGADE_EXPECT(out.sets[c] <= plan_.cells[c].sets, "the plan keeps the buffers its schedule uses");
  return out;
}

void Executor::build_links() {
  const uint32_t K = stages(), C = cells();
  for (uint32_t b = 0; b + 1 < C; ++b) {
    const CellLayout& l = plan_.cells[b];
    const uint64_t bytes =
        ops::stored_bytes(model::elements(model_.layers[l.last - 1]->output_shape()) * l.max_rows, l.output_precision.back());
    const std::string name = "link " + std::to_string(b) + "->" + std::to_string(b + 1);
    vk::Device *from = devices_[b % K], *to = devices_[(b + 1) % K];
    // A plan for forward passes only carries no gradients.
    const bool back = schedule_.training;
    if (from && to) {
      const LinkKind kind = options_.links[b].kind;
      act_links_.push_back(std::make_unique<ProcessLink>(*from, *to, bytes, options_.slots, kind, name + " activations", abort_));
      grad_links_.push_back(back ? std::make_unique<ProcessLink>(*to, *from, bytes, options_.slots, kind, name + " gradients", abort_)
                                 : nullptr);
    } else if (from || to) {
      const bool sends = from != nullptr;  // this process runs cell b
      const uint32_t peer = (sends ? b + 1 : b) % K;
      vk::Device* here = sends ? from : to;
      act_links_.push_back(topology_->remote_link({b, C - 1, false, sends, peer, here, bytes, options_.slots, name + " activations"}));
      grad_links_.push_back(back ? topology_->remote_link({b, C - 1, true, !sends, peer, here, bytes, options_.slots, name + " gradients"})
                                 : nullptr);
    } else {
      act_links_.push_back(nullptr);
      grad_links_.push_back(nullptr);
    }
  }
  abort_.on_raise([this] {
    for (auto* links : {&act_links_, &grad_links_})
      for (auto& l : *links)
        if (l) l->interrupt();
  });
}

void Executor::build_norms() {
  const uint32_t C = cells();
  // Which cells hold each parameter, and those tied across cells (CellLayout::tied).
  for (uint32_t c = 0; c < C; ++c) {
    const CellLayout& cell = plan_.cells[c];
    for (const model::ParamSpec& p : cell.params) {
      shared_->holders[p.name].push_back(c);
      if (std::find(cell.tied.begin(), cell.tied.end(), p.name) != cell.tied.end())
        shared_->tied[p.name] = p.elements();
    }
  }
  shared_->norms.resize(C);
  shared_->tied_copies.resize(C);
  for (uint32_t c = 0; c < C; ++c) {
    if (!local(c) || !schedule_.training) continue;  // a forward takes no gradient's norm
    // The gradients this cell owns (a tied one counts once, on its first holder). A cell
    // holding no tied parameter reduces them in its last gradient submission; one that does
    // must wait for the host to sum the copies, and reduces them in a submission of its own.
    Shared::Norm& norm = shared_->norms[c];
    std::vector<vk::View> grads;
    // Replicas' gradients are summed on the host (BucketSums), before the step: the norm comes after.
    norm.in_backward = topology_->replicas() == 1;
    for (const std::string& name : cells_[c]->trainable()) {
      const std::vector<uint32_t>& holders = shared_->holders.at(name);
      if (holders.size() > 1) norm.in_backward = false;
      if (holders.front() == c) grads.emplace_back(cells_[c]->gradient(name)), norm.names.push_back(name);
    }
    norm.reduce = std::make_unique<optim::GradNorm>(cells_[c]->device(), std::move(grads));
    if (!norm.in_backward) {
      norm.commands = std::make_unique<vk::Commands>(cells_[c]->device(), "cell " + std::to_string(c) + " gradient norm");
      norm.commands->set_replay(options_.replay);  // the same dispatches every step
    }
    if (!plan_.cells[c].tied.empty()) {
      Shared::TiedCopies& copies = shared_->tied_copies[c];
      const std::string tag = "cell " + std::to_string(c) + " tied gradients";
      copies.to_host = std::make_unique<vk::Commands>(cells_[c]->device(), tag + " to the host");
      copies.back = std::make_unique<vk::Commands>(cells_[c]->device(), tag + " back");
      copies.to_host->set_replay(options_.replay);
      copies.back->set_replay(options_.replay);
    }
  }
}

void Executor::build_ring() {
  shared_->writer = topology_->local_stages().at(0);
  shared_->rings.resize(stages());
}

void Executor::zero_state() {
  // Every parameter, gradient and statistics accumulator starts at zero.
  for (uint32_t c = 0; c < cells(); ++c) {
    if (!local(c)) continue;
    vk::Commands cmd(cells_[c]->device(), "cell " + std::to_string(c) + " zero");
    for (const model::ParamSpec& p : plan_.cells[c].params) cmd.fill(cells_[c]->param(p.name));
    cells_[c]->zero_gradients(cmd);
    cmd.run();
  }
}

void Executor::calibrate(bool again) {
  // Again, only where the device reads its clock with the host's: a submission would also
  // move every later one's number (BRIGADE_FAULT counts them).
  std::vector<vk::GpuClock> clocks = again ? clocks_ : std::vector<vk::GpuClock>(stages());
  for (uint32_t k = 0; k < stages(); ++k)
    if (devices_[k] && devices_[k]->info().timestamps && (!again || devices_[k]->info().calibrated_timestamps))
      clocks[k] = vk::calibrate_clock(*devices_[k]);
  clocks_ = std::move(clocks);
  calibrated_us_ = now_us();
}

void Executor::initialize_parameters(uint64_t seed) {
  for (const model::ParamSpec& spec : model_.params())
    if (spec.kind != model::ParamKind::State) set_parameter(spec.name, model::initial_values(spec, seed));
}

void Executor::set_parameter(const std::string& name, const std::vector<float>& values) {
  auto it = shared_->holders.find(name);
  if (it == shared_->holders.end()) throw UserError("the model has no parameter '" + name + "'");
  for (uint32_t k : it->second) {
    if (!local(k)) continue;
    vk::Buffer& b = cells_[k]->param(name);
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
    if (!local(k)) continue;
    const vk::Buffer& b = cells_[k]->param(name);
    std::vector<float> v(b.size() / kFloat);
    vk::download(b, v.data(), b.size());
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<float> Executor::parameter(const std::string& name) const {
  std::vector<std::vector<float>> copies = parameter_copies(name);
  if (copies.empty()) throw UserError("parameter '" + name + "' is held by another process");
  return std::move(copies.front());
}

std::vector<std::string> Executor::held() const {
  std::vector<std::string> out;
  for (const model::ParamSpec& p : model_.params()) {
    const std::vector<uint32_t>& h = shared_->holders.at(p.name);
    if (std::any_of(h.begin(), h.end(), [&](uint32_t c) { return local(c); })) out.push_back(p.name);
  }
  return out;
}

std::vector<float> Executor::gradient(const std::string& name) const {
  auto it = shared_->holders.find(name);
  if (it == shared_->holders.end()) throw UserError("the model has no parameter '" + name + "'");
  // Tied copies hold the same sum: the first one in this process.
  const auto c = std::find_if(it->second.begin(), it->second.end(), [&](uint32_t j) { return local(j); });
  if (c == it->second.end()) throw UserError("parameter '" + name + "' is held by another process");
  Cell& s = *cells_[*c];
  if (!s.holds(name)) throw UserError("the model has no parameter '" + name + "'");
  const vk::Buffer& b = s.gradient(name);
  std::vector<float> v(b.size() / kFloat);
  vk::download(b, v.data(), b.size());
  if (state_->loss_scale != 1)
    for (float& g : v) g = float(double(g) / state_->loss_scale);
  return v;
}

void Executor::attach(optim::Optimizer& optimizer) {
  for (auto& s : cells_)
    if (s)
      for (const std::string& name : s->trainable()) optimizer.add(name, s->param(name), s->gradient(name));
}

uint32_t Executor::recording_turns() const {
  // A step moves both slot counters on by M: the turns repeat every slots / gcd(M, slots) steps.
  const uint32_t slots = std::max(options_.slots, 1u);
  return slots / std::gcd(schedule_.micro_batches, slots);
}

StepResult Executor::train(const Batch& batch, const Update& update) {
  BRIGADE_EXPECT(schedule_.training, "a training step on a pipeline planned for forward passes only");
  BRIGADE_EXPECT(update.loss_scale > 0 && std::isfinite(update.loss_scale), "a positive, finite loss scale");
  state_->loss_scale = update.loss_scale;
  state_->skipped = false;
  run(schedule_, slots_, batch, update, nullptr);
  StepResult result;
  result.loss = state_->loss;
  result.grad_norm = state_->grad_norm;
  result.skipped = state_->skipped;
  const uint32_t K = stages(), C = cells();
  result.trace.stages = K, result.trace.micro_batches = schedule_.micro_batches;
  result.trace.schedule = schedule_kind_name(schedule_.kind);
  result.trace.predicted_bubble = plan_.even_bubble;
  for (auto& e : state_->events) result.trace.actions.insert(result.trace.actions.end(), e.begin(), e.end());
  result.busy_ms = result.trace.summary().busy_ms;  // this process's stages; the others' are 0
  topology_->processes().sum(result.busy_ms);
  for (uint32_t b = 0; b + 1 < C; ++b) {
    if (!act_links_[b]) continue;
    const uint32_t from = b % K, to = (b + 1) % K;
    for (Transfer& t : act_links_[b]->take_transfers()) result.trace.transfers.push_back({from, to, std::move(t)});
    for (Transfer& t : grad_links_[b]->take_transfers()) result.trace.transfers.push_back({to, from, std::move(t)});
  }
  return result;
}

EvalResult Executor::evaluate(const Batch& batch, std::vector<float>* outputs) {
  if (outputs)
    outputs->assign(uint64_t(batch.rows) * model::elements(model_.layers.back()->output_shape()), 0.0f);
  // A batch short of a row for each planned micro-batch of every replica (a split's last):
  // as many micro-batches as the smallest share has rows.
  const uint32_t M = eval_schedule_.micro_batches, R = topology_->replicas();
  if (batch.rows >= R && batch.rows < M * R) {
    const uint32_t m = batch.rows / R;
    auto it = short_evals_.find(m);
    if (it == short_evals_.end()) {
      Schedule s = first_micro_batches(eval_schedule_, m);
      Slots slots = eval_slots(s);
      it = short_evals_.emplace(m, std::pair{std::move(s), std::move(slots)}).first;
    }
    run(it->second.first, it->second.second, batch, Update{}, outputs);
  } else {
    run(eval_schedule_, eval_slots_, batch, Update{}, outputs);
  }
  for (auto* links : {&act_links_, &grad_links_})
    for (auto& l : *links)
      if (l) l->take_transfers();
  // The last cell's sums, over every replica's share (the loss of each is already a share of
  // the mean over the whole batch).
  std::vector<double> sums{0, 0};
  if (local(cells() - 1)) {
    float loss = 0;
    uint32_t correct = 0;
    vk::download(cells_.back()->loss(), &loss, sizeof loss);
    vk::download(cells_.back()->correct(), &correct, sizeof correct);
    sums = {loss, double(correct)};
  }
  topology_->processes().sum(sums);
  topology_->replica_group().sum(sums);
  return EvalResult{sums[0], uint64_t(sums[1])};
}

void Executor::run(const Schedule& schedule, const Slots& slots, const Batch& batch, const Update& update,
                   std::vector<float>* outputs) {
  if (broken_) throw UserError("the pipeline stopped after an earlier failure");
  if (now_us() - calibrated_us_ > 30e6) calibrate(true);
  const uint32_t M = schedule.micro_batches, R = topology_->replicas();
  const uint64_t in = model::elements(model_.input);
  const uint32_t N = std::accumulate(plan_.micro_rows.begin(), plan_.micro_rows.end(), 0u);
  if (batch.rows < M * R || batch.rows > N * R)
    throw UserError("a mini-batch of " + std::to_string(batch.rows) + " samples; this pipeline " +
                    "was planned for " + std::to_string(M * R) + " to " + std::to_string(N * R));
  const size_t inputs = model_.token_input ? batch.tokens.size() : batch.images.size();
  if (inputs != batch.rows * in || batch.targets.size() != uint64_t(batch.rows) * model_.targets_per_sample)
    throw UserError("the batch holds " + std::to_string(inputs) + " inputs and " +
                    std::to_string(batch.targets.size()) + " targets for " +
                    std::to_string(batch.rows) + " samples; the model expects " +
                    std::to_string(in) + " and " + std::to_string(model_.targets_per_sample) +
                    " per sample");
  RunState& st = *state_;
  st.share = topology_->share(batch.rows);
  st.rows = split_rows(st.share.rows, M);
  st.total_rows = batch.rows;
  st.grad_norm = st.loss = 0;
  for (auto& e : st.events) e.clear();

  std::vector<std::thread> threads;
  for (uint32_t k : topology_->local_stages())
    threads.emplace_back([&, k] {
      StageRunner runner(*this, k, schedule, slots, batch, update, outputs);
      if (!runner.run()) topology_->pipeline(k).leave();
    });
  for (auto& t : threads) t.join();
  for (auto* links : {&act_links_, &grad_links_})
    for (auto& l : *links)
      if (l) l->drain();
  if (abort_.raised()) {
    broken_ = true;
    abort_.rethrow();
  }
  forwards_ += M;
  if (schedule.training) backwards_ += M;
}

}  // namespace brigade::pipeline
