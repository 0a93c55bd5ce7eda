// The step itself against an independent reference: the other pipeline cases compare one
// executor run with another, which a fault shared by both (the clip left out of the update, a
// wrong rate) passes. Here fashion-mlp's loss and gradients equal engine/ref's layers composed
// on the host in double, and one optimizer step equals the update computed on the host from
// the executor's own gradients: torch's clip_grad_norm_ scale, then ref::sgd_step or
// ref::adamw_step in double.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "check.h"
#include "equivalence.h"
#include "gpu.h"
#include "model/model.h"
#include "optim/adamw.h"
#include "optim/sgd.h"
#include "pipeline/executor.h"
#include "ref/activation.h"
#include "ref/cross_entropy.h"
#include "ref/linear.h"
#include "ref/optim.h"

namespace pipeline_step_reference_test {

using namespace brigade;
using test::check_close, test::max_abs, test::to_double, test::to_float;

namespace {

using Floats = std::map<std::string, std::vector<float>>;
using Doubles = std::map<std::string, std::vector<double>>;

constexpr uint32_t kRows = 8;

struct Reference {
  double loss = 0;
  Doubles grads;
};

// models/fashion-mlp.toml on the host in double: flatten, Linear(784, 256), ReLU,
// Linear(256, 128), ReLU, Linear(128, 10), mean cross-entropy; layer l's parameters are
// "l.weight" and "l.bias", as PyTorch's Sequential names them.
Reference reference(const Floats& params, const pipeline::Batch& b) {
  const uint32_t N = b.rows, width[] = {784, 256, 128, 10};
  const char* layer[] = {"1", "3", "5"};
  const auto param = [&](int l, const char* what) { return to_double(params.at(layer[l] + std::string(what))); };
  std::vector<std::vector<double>> x{to_double(b.images)};  // each Linear's input, then the logits
  for (int l = 0; l < 3; ++l) {
    std::vector<double> y(size_t(N) * width[l + 1]);
    ref::linear_forward<double>(x[l], param(l, ".weight"), param(l, ".bias"), y, N, width[l], width[l + 1]);
    if (l < 2) ref::relu_forward(y.data(), y.data(), uint32_t(y.size()));
    x.push_back(std::move(y));
  }
  Reference r;
  ref::cross_entropy_forward(x[3].data(), b.targets.data(), r.loss, N, 10, N);
  std::vector<double> dy(size_t(N) * 10);
  ref::cross_entropy_backward(x[3].data(), b.targets.data(), dy.data(), N, 10, N);
  for (int l = 2; l >= 0; --l) {
    std::vector<double>& dw = r.grads[layer[l] + std::string(".weight")];
    std::vector<double>& db = r.grads[layer[l] + std::string(".bias")];
    dw.assign(size_t(width[l + 1]) * width[l], 0), db.assign(width[l + 1], 0);
    ref::linear_backward_weight<double>(dy, x[l], dw, db, N, width[l], width[l + 1]);
    if (l == 0) break;
    std::vector<double> dx(size_t(N) * width[l], 0);
    ref::linear_backward_data<double>(dy, param(l, ".weight"), dx, N, width[l], width[l + 1]);
    ref::relu_backward(x[l].data(), dx.data(), dx.data(), uint32_t(dx.size()));  // x[l]: ReLU's output
    dy = std::move(dx);
  }
  return r;
}

struct Stepped {
  Floats before, grads, after;  // parameters before the step, gradients, parameters after it
  pipeline::StepResult result;
};

// One mini-batch through fashion-mlp on K logical devices in M micro-batches, from the
// initial parameters of seed 7; with `opt`, an update of step 1 at `lr`, clipped at
// `max_norm` (0: not clipped), from the loss times `loss_scale`.
Stepped step(test::Gpu& gpu, const model::Model& m, uint32_t K, uint32_t M, const pipeline::Batch& b,
             optim::Optimizer* opt = nullptr, uint32_t states = 0, double lr = 0, double max_norm = 0,
             double loss_scale = 1) {
  std::vector<vk::Device*> devices;
  for (uint32_t k = 0; k < K; ++k) devices.push_back(&gpu.device(k));
  test::PipelineConfig c;
  c.M = M;
  pipeline::Executor ex(m, devices, test::make_plan(m, K, c, b.rows, states, devices), {c.link, 2});
  ex.initialize_parameters(7);
  Stepped s;
  for (const model::ParamSpec& p : m.params()) s.before[p.name] = ex.parameter(p.name);
  pipeline::Update u;
  if (opt) ex.attach(*opt), u = {opt, optim::Step{1, lr, 1}, max_norm};
  u.loss_scale = loss_scale;
  s.result = ex.train(b, u);
  for (const model::ParamSpec& p : m.params()) {
    REQUIRE(p.kind == model::ParamKind::Trainable);
    s.grads[p.name] = ex.gradient(p.name);
    s.after[p.name] = ex.parameter(p.name);
  }
  return s;
}

// The loss and every gradient equal the reference's within fp32 rounding of sums of up to
// 784 products.
void check_reference(const Stepped& s, const Reference& want, const std::string& what) {
  CHECK_MESSAGE(std::fabs(s.result.loss - want.loss) <= 1e-6 * want.loss, what, ": loss ", s.result.loss, " vs ",
                want.loss);
  REQUIRE(s.grads.size() == want.grads.size());
  for (const auto& [name, g] : want.grads) {
    const std::vector<float> expected = to_float(g);
    check_close(s.grads.at(name), expected, 1e-5 * max_abs(expected), 1e-5, what + ": gradient of " + name);
  }
}

// torch.nn.utils.clip_grad_norm_'s scale (optim::clip's formula, written out here so that a
// change there shows) from the executor's own gradients: min(1, max_norm / (||g|| + 1e-6)),
// 1 where max_norm is 0 (pipeline::Update: no clipping). Also checks the norm the step reported.
double clip_scale(const Stepped& s, double max_norm) {
  double squares = 0;
  for (const auto& [name, g] : s.grads)
    for (float v : g) squares += double(v) * v;
  const double norm = std::sqrt(squares);
  CHECK_MESSAGE(std::fabs(s.result.grad_norm - norm) <= 1e-6 * norm, "grad_norm ", s.result.grad_norm, " vs ", norm);
  return max_norm > 0 ? std::min(1.0, max_norm / (norm + 1e-6)) : 1.0;
}

// One update of `opt` (its first: zero state, step 1) at `lr`, clipped at `max_norm`, from the
// loss times `loss_scale`, on fashion-mlp on one device: what each parameter moved by (after -
// before) equals what `host` moves it by in double, given the executor's gradients and
// clip_scale() as Step::grad_scale; within two fp32 roundings of the largest parameter (the
// update's results) and 1e-5 of the step. Returns the scale.
template <class HostStep>
double check_update(test::Gpu& gpu, optim::Optimizer& opt, uint32_t states, double lr, double max_norm,
                    double loss_scale, const std::string& what, const HostStep& host) {
  const model::Model m = model::build("fashion-mlp");
  const Stepped s = step(gpu, m, 1, 1, pipeline::random_batch(m, kRows, 3), &opt, states, lr, max_norm, loss_scale);
  const double scale = clip_scale(s, max_norm);
  for (const auto& [name, g] : s.grads) {
    const std::vector<float>& before = s.before.at(name);
    std::vector<double> want = to_double(before);
    host(std::span<double>(want), std::span<const double>(to_double(g)), optim::Step{1, lr, scale});
    std::vector<float> moved(before.size()), should(before.size());
    for (size_t i = 0; i < before.size(); ++i) {
      moved[i] = float(double(s.after.at(name)[i]) - before[i]);
      should[i] = float(want[i] - before[i]);
    }
    check_close(moved, should, std::ldexp(max_abs(before), -22), 1e-5, what + ": step of " + name);
  }
  return scale;
}

// Plain SGD (no momentum; weight decay 0.01, whose term shows beside the gradient's) at 0.05.
const optim::SgdOptions kSgd{.momentum = 0, .weight_decay = 0.01};

double check_sgd(test::Gpu& gpu, double max_norm, double loss_scale, const std::string& what) {
  optim::Sgd sgd(kSgd);
  return check_update(gpu, sgd, 0, 0.05, max_norm, loss_scale, what,
                      [](std::span<double> p, std::span<const double> g, const optim::Step& st) {
                        ref::sgd_step<double>(p, g, {}, uint32_t(g.size()), kSgd, st);
                      });
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "fashion-mlp's loss and gradients equal a CPU reference in double, on one device and two") {
  const model::Model m = model::build("fashion-mlp");
  const pipeline::Batch b = pipeline::random_batch(m, kRows, 3);
  const Stepped one = step(*this, m, 1, 1, b);
  const Reference want = reference(one.before, b);
  check_reference(one, want, "K=1 M=1");
  check_reference(step(*this, m, 2, 2, b), want, "K=2 M=2");
}

TEST_CASE_FIXTURE(test::Gpu, "one SGD step clipped at a norm its gradients exceed equals the update computed on the host") {
  const double scale = check_sgd(*this, 0.2, 1, "SGD clipped at 0.2");
  CHECK_MESSAGE(scale < 0.5, "the clip is not active enough to show: scale ", scale);
}

TEST_CASE_FIXTURE(test::Gpu, "one SGD step under a norm its gradients do not reach, or unclipped, equals the host's at a loss scale of 4") {
  // A loss scale of 4 (a power of two: the same gradients) that the update must divide out,
  // on either of the step's paths: clipping on (a scale of 1) and off.
  CHECK(check_sgd(*this, 100, 4, "SGD clipped at 100, loss scale 4") == 1.0);
  CHECK(check_sgd(*this, 0, 4, "SGD not clipped, loss scale 4") == 1.0);
}

TEST_CASE_FIXTURE(test::Gpu, "one AdamW step clipped at a norm its gradients exceed equals engine/ref's adamw_step") {
  // eps near the clipped gradients' size (about 2e-4), so that the step depends on the clip:
  // a first Adam step is lr g / (|g| + eps), close to lr sign(g) with the clip or without it
  // where eps is far below |g|.
  const optim::AdamWOptions o{.eps = 1e-5, .weight_decay = 0.1};
  optim::AdamW adamw(o);
  const double scale = check_update(
      *this, adamw, 2, 1e-3, 0.2, 1, "AdamW clipped at 0.2",
      [&](std::span<double> p, std::span<const double> g, const optim::Step& st) {
        std::vector<double> exp_avg(g.size()), exp_avg_sq(g.size());
        ref::adamw_step<double>(p, g, exp_avg, exp_avg_sq, uint32_t(g.size()), o, st);
      });
  CHECK_MESSAGE(scale < 0.5, "the clip is not active enough to show: scale ", scale);
}

}  // namespace pipeline_step_reference_test
