#include "equivalence.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "check.h"
#include "optim/adamw.h"
#include "optim/sgd.h"

namespace brigade::test {

std::string describe(const PipelineConfig& c) {
  std::string precisions;
  for (size_t i = 0; i < c.precision.size(); ++i) precisions += (i ? "," : " ") + std::string(ops::precision_name(c.precision[i]));
  if (!c.layer_precision.empty()) precisions += " per layer";
  return std::string(pipeline::schedule_kind_name(c.schedule)) + (c.V > 1 ? " V=" + std::to_string(c.V) : "") +
         " M=" + std::to_string(c.M) + " remat " + pipeline::remat_name(c.remat) + " link " +
         pipeline::link_name(c.link) + precisions;
}

pipeline::Plan make_plan(const model::Model& m, uint32_t K, const PipelineConfig& c, uint32_t rows,
                         uint32_t optimizer_states, const std::vector<vk::Device*>& devices) {
  pipeline::PlanOptions o;
  o.rows = rows, o.micro_batches = c.M, o.remat = c.remat, o.optimizer_states = optimizer_states;
  o.schedule = c.schedule, o.virtual_stages = c.V, o.training = !c.forward_only;
  o.precision = c.precision, o.layer_precision = c.layer_precision;
  o.stages.assign(K, pipeline::StageSpec{});
  for (uint32_t k = 0; k < K && k < devices.size(); ++k) {
    o.stages[k].facts = pipeline::device_facts(m, devices[k]->info());
    if (c.fp32_copies) o.stages[k].facts.stores_half.clear(), o.stages[k].facts.lean_scratch.clear();
  }
  if (!c.layer_stores_half.empty()) o.stages.at(0).facts.stores_half = c.layer_stores_half;
  return pipeline::plan(m, o);
}

Outcome run(const model::Model& m, const std::vector<vk::Device*>& devices, const PipelineConfig& c,
            const std::vector<pipeline::Batch>& batches, uint32_t steps, Update update) {
  const bool train = steps > 0;
  const uint32_t states = !train ? 0 : update == Update::AdamW ? 2 : 1;
  const pipeline::Plan plan = make_plan(m, uint32_t(devices.size()), c, batches[0].rows, states, devices);
  pipeline::Executor ex(m, devices, plan, {c.link, 2});
  ex.initialize_parameters(7);
  if (ops::is_half(c.round_products)) {
    std::set<std::string> products, plain;
    for (const auto& layer : m.layers)
      for (const model::ParamSpec& p : layer->params()) (p.product ? products : plain).insert(p.name);
    for (const std::string& name : products) {
      if (plain.count(name)) continue;
      std::vector<float> v = ex.parameter(name);
      for (float& x : v) x = ops::round_on_host(x, c.round_products);
      ex.set_parameter(name, v);
    }
  }
  optim::Sgd sgd(optim::SgdOptions{.momentum = 0.9, .weight_decay = 1e-4});
  // eps 1e-6 rather than 1e-8: a gradient at fp32 noise level (the key bias's, which softmax
  // makes exactly zero in exact arithmetic) would otherwise take a near-full step whose size
  // and sign are rounding noise, different on each driver.
  optim::AdamW adamw(optim::AdamWOptions{.eps = 1e-6, .weight_decay = 0.1});
  optim::Optimizer& opt = update == Update::AdamW ? static_cast<optim::Optimizer&>(adamw) : sgd;
  const double lr = update == Update::AdamW ? 1e-3 : 0.05;
  if (train) ex.attach(opt);
  Outcome out;
  for (uint32_t s = 0; s < std::max(steps, 1u); ++s) {
    pipeline::Update u;
    if (train) u = {&opt, optim::Step{s + 1, lr, 1}, 0.5};  // clipping at a norm it exceeds
    u.loss_scale = c.loss_scale;
    const pipeline::StepResult r = ex.train(batches[s % batches.size()], u);
    out.losses.push_back(r.loss);
    out.loss = r.loss;
  }
  for (const model::ParamSpec& p : m.params()) {
    if (p.kind == model::ParamKind::Trainable) out.grads[p.name] = ex.gradient(p.name);
    if (p.kind != model::ParamKind::State) out.params[p.name] = ex.parameter(p.name);
    if (p.kind == model::ParamKind::Trainable) {
      // A parameter tied across stages has the same bits on every stage holding it.
      const auto copies = ex.parameter_copies(p.name);
      for (size_t j = 1; j < copies.size(); ++j) CHECK_MESSAGE(copies[j] == copies[0], p.name, " copies differ");
    }
  }
  return out;
}

void check_equal(const Outcome& got, const Outcome& want, const std::string& what, bool params,
                 double param_atol, double grad_rel) {
  REQUIRE(got.losses.size() == want.losses.size());
  for (size_t s = 0; s < got.losses.size(); ++s)
    CHECK_MESSAGE(std::fabs(got.losses[s] - want.losses[s]) <= 1e-5 * std::max(1.0, std::fabs(want.losses[s])),
                  what, ": loss of step ", s, " ", got.losses[s], " vs ", want.losses[s]);
  for (const auto& [name, g] : want.grads)
    check_close(got.grads.at(name), g, std::max(2e-5, grad_rel) * std::max(max_abs(g), 1e-3), 1e-4,
                what + ": gradient of " + name);
  if (params)
    for (const auto& [name, p] : want.params)
      check_close(got.params.at(name), p, std::max(2e-5 * std::max(max_abs(p), 1e-3), param_atol), 1e-4,
                  what + ": parameter " + name);
}

Evaluation evaluate(const model::Model& m, const std::vector<vk::Device*>& devices,
                    const PipelineConfig& c, const pipeline::Batch& b) {
  pipeline::Executor ex(m, devices, make_plan(m, uint32_t(devices.size()), c, b.rows, 1, devices), {c.link, 2});
  ex.initialize_parameters(7);
  Evaluation e;
  e.result = ex.evaluate(b, &e.logits);
  // Evaluation changes nothing, and leaves the pipeline able to train and evaluate again.
  const double again = ex.evaluate(b).loss;
  CHECK(again == e.result.loss);
  ex.train(b);  // without an update; BatchNorm's running statistics do move
  bool buffers = false;
  for (const model::ParamSpec& p : m.params()) buffers |= p.kind == model::ParamKind::Buffer;
  if (!buffers) CHECK(ex.evaluate(b).loss == e.result.loss);
  return e;
}

void check_equal(const Evaluation& got, const Evaluation& want, const std::string& what) {
  CHECK_MESSAGE(got.result.loss == doctest::Approx(want.result.loss).epsilon(1e-5), what);
  CHECK_MESSAGE(got.result.correct == want.result.correct, what);
  check_close(got.logits, want.logits, 2e-5 * std::max(max_abs(want.logits), 1e-3), 1e-4, what + ": outputs");
}

}  // namespace brigade::test
