// GPipe's promise, checked: a model cut into K stages on K logical devices, with the
// mini-batch split into M micro-batches, any re-materialization mode and any link path,
// gives the loss and gradients of the single-device, single-batch run (to fp32 rounding),
// and the same parameters after optimizer steps. Also: activation memory equals the plan.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "check.h"
#include "equivalence.h"
#include "gpu.h"
#include "model/layers.h"
#include "model/model.h"
#include "pipeline/executor.h"
#include "pipeline/plan.h"
#include "pipeline/profile.h"

namespace pipeline_executor_test {

using namespace brigade;
using pipeline::LinkKind;
using pipeline::Remat;
using pipeline::random_batch;
using test::check_equal, test::Evaluation, test::max_abs, test::Outcome;

namespace {

struct Config {
  uint32_t K = 1, M = 1;
  Remat remat = Remat::Never;
  LinkKind link = LinkKind::Auto;
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::GPipe;
  uint32_t V = 1;
};

test::PipelineConfig pipeline_config(const Config& c) { return {c.M, c.remat, c.link, c.schedule, c.V}; }

std::string describe(const Config& c) { return "K=" + std::to_string(c.K) + " " + test::describe(pipeline_config(c)); }

std::vector<vk::Device*> devices(test::Gpu& gpu, uint32_t K) {
  std::vector<vk::Device*> out;
  for (uint32_t k = 0; k < K; ++k) out.push_back(&gpu.device(k));
  return out;
}

pipeline::Plan make_plan(const model::Model& m, const Config& c, uint32_t rows, uint32_t optimizer_states) {
  return test::make_plan(m, c.K, pipeline_config(c), rows, optimizer_states);
}

// Runs `steps` mini-batches (0: one forward and backward without an update) on c.K
// logical devices of the fixture.
Outcome run(test::Gpu& gpu, const model::Model& m, const Config& c,
            const std::vector<pipeline::Batch>& batches, uint32_t steps) {
  return test::run(m, devices(gpu, c.K), pipeline_config(c), batches, steps);
}

// Every K in {1,2,4} with every M in {1,2,4,8}; every remat mode and link path at K=2 and
// K=4; three optimizer steps at two pipelined configurations.
// `window`: a GPT's tokens per row, when shorter than its block (CI time).
void check_model(test::Gpu& gpu, const std::string& preset, uint32_t rows, uint32_t window = 0) {
  const model::Model m = window ? model::with_window(model::build(preset), window) : model::build(preset);
  const std::vector<pipeline::Batch> batches{random_batch(m, rows, 1), random_batch(m, rows, 2),
                                             random_batch(m, rows, 3)};
  const Outcome reference = run(gpu, m, Config{}, batches, 0);
  CHECK(std::isfinite(reference.loss));
  std::vector<Config> configs;
  for (uint32_t K : {1u, 2u, 4u})
    for (uint32_t M : {1u, 2u, 4u, 8u})
      if (K > 1 || M > 1) configs.push_back({K, M, Remat::Never, LinkKind::Auto});
  for (Remat r : {Remat::Always, Remat::ExceptLast}) {
    configs.push_back({2, 4, r, LinkKind::Auto});
    configs.push_back({4, 8, r, LinkKind::Auto});
  }
  for (LinkKind l : {LinkKind::Fd, LinkKind::Host, LinkKind::Staging}) {
    configs.push_back({2, 2, Remat::Always, l});
    configs.push_back({4, 4, Remat::ExceptLast, l});
  }
  for (const Config& c : configs)
    check_equal(run(gpu, m, c, batches, 0), reference, preset + " " + describe(c), false);

  const Outcome trained = run(gpu, m, Config{}, batches, 3);
  CHECK(trained.losses[2] != trained.losses[0]);  // the steps did change the model
  for (const Config& c : {Config{4, 4, Remat::ExceptLast, LinkKind::Host}, Config{2, 8, Remat::Always, LinkKind::Staging}})
    check_equal(run(gpu, m, c, batches, 3), trained, preset + " trained 3 steps " + describe(c), true);
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "fashion-mlp pipelined equals one device and one batch") {
  check_model(*this, "fashion-mlp", 10);  // 10 rows: M=4 and M=8 split unevenly
}

TEST_CASE_FIXTURE(test::Gpu, "fashion-cnn pipelined equals one device and one batch") {
  check_model(*this, "fashion-cnn", 10);
}

TEST_CASE_FIXTURE(test::Gpu, "gpt-mini pipelined equals one device and one batch with tied embeddings") {
  check_model(*this, "gpt-mini", 8, 32);  // a window's logits equal the block's: tested below
}

TEST_CASE_FIXTURE(test::Gpu, "fashion-cnn-bn pipelined equals BatchNorm applied to each micro-batch on its own") {
  // GPipe's BatchNorm: training statistics per micro-batch. The reference runs each
  // micro-batch alone on one device and weights its loss and gradients by its share of the
  // mini-batch; running statistics move once, by the whole mini-batch's mean and variance.
  const model::Model m = model::build("fashion-cnn-bn");
  const uint32_t N = 10;
  const pipeline::Batch batch = random_batch(m, N, 5);
  // The other schedules run the same per-micro-batch passes in other orders.
  for (const Config& c : {Config{2, 4, Remat::Always, LinkKind::Auto}, Config{4, 3, Remat::ExceptLast, LinkKind::Staging},
                          Config{1, 2, Remat::Never, LinkKind::Auto},
                          Config{3, 4, Remat::Never, LinkKind::Host, pipeline::ScheduleKind::OneFOneB},
                          Config{4, 3, Remat::Always, LinkKind::Auto, pipeline::ScheduleKind::ZeroBubble},
                          Config{2, 4, Remat::ExceptLast, LinkKind::Staging, pipeline::ScheduleKind::Interleaved, 2}}) {
    const std::vector<uint32_t> rows = pipeline::split_rows(N, c.M);
    Outcome want;
    std::map<std::string, std::vector<double>> grads;
    std::vector<Outcome> parts;
    uint32_t first = 0;
    for (uint32_t r : rows) {
      pipeline::Batch part;
      part.rows = r;
      const uint64_t in = model::elements(m.input);
      part.images.assign(batch.images.begin() + first * in, batch.images.begin() + (first + r) * in);
      part.targets.assign(batch.targets.begin() + first, batch.targets.begin() + first + r);
      parts.push_back(run(*this, m, Config{}, {part}, 0));
      const double share = double(r) / N;
      want.loss += share * parts.back().loss;
      for (const auto& [name, g] : parts.back().grads) {
        grads[name].resize(g.size());
        for (size_t e = 0; e < g.size(); ++e) grads[name][e] += share * g[e];
      }
      first += r;
    }
    want.losses = {want.loss};
    for (const auto& [name, g] : grads) want.grads[name] = test::to_float(g);
    const Outcome got = run(*this, m, c, {batch}, 0);
    check_equal(got, want, "fashion-cnn-bn " + describe(c), false);

    // Running statistics after the mini-batch, from each micro-batch's own update (momentum
    // 0.1 from mean 0 and variance 1): the mini-batch mean is the rows-weighted mean of the
    // micro-batch means; the unbiased variance adds the spread of those means.
    for (const char* bn : {"1", "5"}) {
      const std::string mean_name = std::string(bn) + ".running_mean", var_name = std::string(bn) + ".running_var";
      const size_t C = got.params.at(mean_name).size();
      std::vector<float> mean(C), var(C);
      for (size_t ch = 0; ch < C; ++ch) {
        const double hw = bn[0] == '1' ? 28 * 28 : 14 * 14;
        double mu = 0;
        std::vector<double> mu_j, var_j;
        for (size_t j = 0; j < parts.size(); ++j) {
          mu_j.push_back(parts[j].params.at(mean_name)[ch] / 0.1);
          var_j.push_back((parts[j].params.at(var_name)[ch] - 0.9) / 0.1);
          mu += rows[j] * mu_j.back() / N;
        }
        double ss = 0;
        for (size_t j = 0; j < parts.size(); ++j) {
          const double n_j = rows[j] * hw;
          ss += (n_j - 1) * var_j[j] + n_j * (mu_j[j] - mu) * (mu_j[j] - mu);
        }
        mean[ch] = float(0.1 * mu);
        var[ch] = float(0.9 + 0.1 * ss / (N * hw - 1));
      }
      test::check_close(got.params.at(mean_name), mean, 1e-5, 1e-4, describe(c) + " " + mean_name);
      test::check_close(got.params.at(var_name), var, 1e-5, 1e-4, describe(c) + " " + var_name);
    }
  }
}

// A GPU stage keeps a workspace for its products' split K (ops/matmul_split.h): planned with
// the stage's scratch, held by each cell while it records (lavapipe splits none itself).
TEST_CASE_FIXTURE(test::Gpu, "a stage's products' workspace is planned and held with its scratch") {
  const model::Model m = model::build("fashion-mlp");
  const uint32_t N = 16, K = 2;
  const auto planned = [&](uint64_t workspace) {
    pipeline::PlanOptions o;
    o.rows = N, o.micro_batches = 2, o.optimizer_states = 0;
    o.stages.assign(K, pipeline::StageSpec{});
    o.stages[1].facts.workspace_bytes = workspace;
    return pipeline::plan(m, o);
  };
  const pipeline::Plan plain = planned(0), plan = planned(3u << 20);
  const int scratch = int(vk::Category::Scratch);
  // A plan for forward passes keeps none: only backward passes split their products' K.
  pipeline::PlanOptions forward;
  forward.rows = N, forward.micro_batches = 2, forward.training = false;
  forward.stages.assign(K, pipeline::StageSpec{});
  forward.stages[1].facts.workspace_bytes = 3u << 20;
  CHECK(pipeline::plan(m, forward).cells[1].workspace_bytes == 0);
  CHECK(plan.cells[0].memory(0) == plain.cells[0].memory(0));
  CHECK(plan.cells[1].workspace_bytes == 3u << 20);
  CHECK(plan.cells[1].memory(0)[scratch] == plain.cells[1].memory(0)[scratch] + (3u << 20));
  std::vector<vk::Device*> devices = {&device(0), &device(1)};
  {
    pipeline::Executor ex(m, devices, plan, {LinkKind::Auto, 2});
    for (vk::Device* d : devices) d->memory().reset_peaks();
    ex.train(random_batch(m, N, 3));
  }
  for (uint32_t k = 0; k < K; ++k)
    CHECK_MESSAGE(device(k).memory().stats().peak[scratch] == plan.cells[k].memory(0)[scratch], "stage ", k);
}

TEST_CASE_FIXTURE(test::Gpu, "each stage's activation memory is what the planner predicts, and remat shrinks it") {
  const model::Model m = model::build("fashion-cnn");
  const uint32_t N = 16, K = 2;
  const pipeline::Batch batch = random_batch(m, N, 9);
  std::map<std::pair<uint32_t, Remat>, std::vector<uint64_t>> measured;
  for (uint32_t M : {1u, 4u, 8u})
    for (Remat r : {Remat::Never, Remat::Always, Remat::ExceptLast}) {
      const Config c{K, M, r, LinkKind::Auto};
      const pipeline::Plan plan = make_plan(m, c, N, 0);
      std::vector<vk::Device*> devices;
      for (uint32_t k = 0; k < K; ++k) {
        devices.push_back(&device(k));
        REQUIRE(device(k).memory().stats().current[int(vk::Category::Activations)] == 0);
      }
      {
        pipeline::Executor ex(m, devices, plan, {LinkKind::Auto, 2});
        // The step's peak: on a device whose memory the host cannot map, setting the
        // parameters went through staging copies, which the step does not hold.
        for (vk::Device* d : devices) d->memory().reset_peaks();
        ex.train(batch);
      }
      for (uint32_t k = 0; k < K; ++k) {
        const vk::MemoryStats st = device(k).memory().stats();
        const pipeline::Bytes want = plan.cells[k].memory(0);
        for (vk::Category cat : {vk::Category::Activations, vk::Category::Parameters, vk::Category::Gradients,
                                 vk::Category::Transfer, vk::Category::Scratch})
          CHECK_MESSAGE(st.peak[int(cat)] == want[int(cat)], describe(c), " stage ", k, " ",
                        std::string(vk::category_name(cat)), ": measured ", st.peak[int(cat)], " planned ", want[int(cat)]);
        // The plan's total is the most this stage ever holds: what --mem-limit is checked against.
        CHECK_MESSAGE(st.total_peak <= pipeline::total(want), describe(c), " stage ", k, ": peak ", st.total_peak,
                      " planned ", pipeline::total(want));
        measured[{M, r}].push_back(st.peak[int(vk::Category::Activations)]);
      }
    }
  for (uint32_t k = 0; k < K; ++k) {
    // With M = 1 there is nothing to re-materialize from.
    CHECK(measured[{1, Remat::Never}][k] == measured[{1, Remat::Always}][k]);
    // With remat a stage keeps every micro-batch's input but only one micro-batch's
    // activations: O(N + L/K * N/M), shrinking as M grows...
    CHECK(measured[{8, Remat::Always}][k] < measured[{4, Remat::Always}][k]);
    CHECK(measured[{4, Remat::Always}][k] < measured[{1, Remat::Always}][k]);
    // ...while without it all M micro-batches keep theirs: M - 1 more sets of activations.
    const pipeline::CellLayout l = make_plan(m, {K, 8, Remat::Always, LinkKind::Auto}, N, 0).cells[k];
    uint64_t set = l.loss_rows_bytes;
    for (size_t j = 0; j < l.output_bytes.size(); ++j) {
      set += l.output_bytes[j];
      for (uint64_t b : l.saved_bytes[j]) set += b;
    }
    CHECK(set > 0);
    CHECK(measured[{8, Remat::Never}][k] - measured[{8, Remat::Always}][k] == 7 * set);
    // except-last keeps the last micro-batch's activations in the one set remat needs anyway.
    CHECK(measured[{8, Remat::ExceptLast}][k] == measured[{8, Remat::Always}][k]);
  }
}

TEST_CASE_FIXTURE(test::Gpu, "profiling times every layer on the device, convolutions above activations") {
  const model::Model m = model::build("fashion-cnn");
  // Medians of 5 runs: one run can be delayed whole by whatever else shares the CPU.
  const std::vector<double> t = pipeline::profile_layers(device(0), m, 16, ops::Precision::Fp32, 5);
  REQUIRE(t.size() == m.layers.size());
  for (size_t l = 0; l < t.size(); ++l)  // a view records no work; every other layer some
    CHECK_MESSAGE((m.layers[l]->is_view() ? t[l] >= 0 : t[l] > 0), "layer ", l, ": ", t[l]);
  // Conv2d(32, 64) on 14x14 against Flatten, which does nothing. (Not against the ReLU: with
  // a sanitizer in the process, the driver's per-dispatch host work can outweigh a small
  // convolution on a CPU device.)
  CHECK(t[3] > t[6]);
}

TEST_CASE_FIXTURE(test::Gpu, "a GPT's layer times come from one block's, every block given them") {
  const model::Model m = model::with_window(model::build("gpt-mini", {"n_layer=3"}), 16);
  const pipeline::LayerProfile p = pipeline::profile_layer_times(device(0), m, 2, 1);
  REQUIRE(p.forward.size() == m.layers.size());
  REQUIRE(p.backward.size() == m.layers.size());
  for (size_t l = 0; l < m.layers.size(); ++l) {
    CAPTURE(l);
    CHECK(p.forward[l] > 0);
    CHECK(p.backward[l] > 0);
    if (l >= 3 && l <= 6) {  // blocks 1 and 2 take block 0's times (layers 1 and 2)
      CHECK(p.forward[l] == p.forward[l - 2]);
      CHECK(p.backward[l] == p.backward[l - 2]);
    }
  }
  CHECK(p.forward[1] != p.forward[2]);  // attention and MLP timed apart
}

// eval and sample plan by forward passes alone: their profile times evaluation's forwards
// (BatchNorm on its running statistics) on a cell planned for them, and nothing else.
TEST_CASE_FIXTURE(test::Gpu, "a forward-only profile times evaluation's forward passes alone") {
  const model::Model m = model::build("fashion-cnn-bn");
  const pipeline::LayerProfile p = pipeline::profile_model(device(0), m, 4, 1, true, ops::Precision::Fp32, false);
  REQUIRE(p.forward.size() == m.layers.size());
  REQUIRE(p.backward.size() == m.layers.size());
  for (size_t l = 0; l < m.layers.size(); ++l) {
    CAPTURE(l);
    CHECK((m.layers[l]->is_view() ? p.forward[l] >= 0 : p.forward[l] > 0));
    CHECK(p.backward[l] == 0);
  }
  std::set<std::string> kernels;
  for (const pipeline::KernelTime& k : p.kernels) {
    CHECK_MESSAGE(!k.backward, k.kernel);
    CHECK_MESSAGE(!k.loss, k.kernel);
    kernels.insert(k.kernel.substr(0, k.kernel.find('|')));  // the shader, without its constants
  }
  CHECK(kernels.count("batchnorm_forward_eval") == 1);
  CHECK(kernels.count("batchnorm_forward_train") == 0);
}

namespace {

Evaluation evaluate(test::Gpu& gpu, const model::Model& m, const Config& c, const pipeline::Batch& b) {
  return test::evaluate(m, devices(gpu, c.K), pipeline_config(c), b);
}

// Mean cross-entropy and argmax hits of logits, on the CPU.
std::pair<double, uint64_t> score(const std::vector<float>& logits, const std::vector<int32_t>& targets,
                                  uint32_t classes) {
  double loss = 0;
  uint64_t correct = 0;
  for (size_t r = 0; r < targets.size(); ++r) {
    const float* z = logits.data() + r * classes;
    const float top = *std::max_element(z, z + classes);
    double sum = 0;
    for (uint32_t j = 0; j < classes; ++j) sum += std::exp(double(z[j]) - top);
    loss += std::log(sum) + top - z[targets[r]];
    correct += uint32_t(std::max_element(z, z + classes) - z) == uint32_t(targets[r]);
  }
  return {loss / double(targets.size()), correct};
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "a GPT on windows shorter than its block: the block's first positions, and pipelined equals one device") {
  const model::Model full = model::build("gpt-mini", {"n_layer=2"});
  const uint32_t T = 24, rows = 4, V = full.classes, block = full.input.at(0);
  const model::Model m = model::with_window(full, T);
  const pipeline::Batch b = random_batch(m, rows, 5);
  pipeline::Batch fb = random_batch(full, rows, 6);  // each row: b's T tokens, then others
  for (uint32_t r = 0; r < rows; ++r)
    std::copy_n(b.tokens.begin() + r * T, T, fb.tokens.begin() + r * block);
  const Evaluation w = evaluate(*this, m, {1, 1}, b), f = evaluate(*this, full, {1, 1}, fb);
  REQUIRE(w.logits.size() == size_t(rows) * T * V);
  std::vector<float> first(w.logits.size());  // the full block's logits at positions < T
  for (uint32_t r = 0; r < rows; ++r)
    std::copy_n(f.logits.begin() + size_t(r) * block * V, size_t(T) * V, first.begin() + size_t(r) * T * V);
  test::check_close(w.logits, first, 1e-5, 1e-4, "window logits against the block's first positions");
  const Outcome one = run(*this, m, {1, 1}, {b}, 0);
  CHECK(std::isfinite(one.loss));
  for (const Config& c : {Config{2, 3, Remat::Always}, Config{3, 4, Remat::Never, LinkKind::Host}})
    check_equal(run(*this, m, c, {b}, 0), one, "window 24 " + describe(c), false);
}

TEST_CASE_FIXTURE(test::Gpu, "evaluation pipelined equals one device: loss, correct count and outputs") {
  for (const char* preset : {"fashion-cnn", "gpt-mini", "fashion-cnn-bn"}) {
    const model::Model m = model::build(preset);
    const pipeline::Batch b = random_batch(m, 10, 3);
    const Evaluation want = evaluate(*this, m, {1, 1}, b);
    const auto [loss, correct] = score(want.logits, b.targets, m.classes);
    CHECK_MESSAGE(want.result.loss == doctest::Approx(loss).epsilon(1e-5), preset);
    CHECK_MESSAGE(want.result.correct == correct, preset);
    // Without BatchNorm evaluation's loss is training's; with it, evaluation normalizes by
    // the running statistics rather than the batch's.
    const Outcome trained = run(*this, m, {1, 1}, {b}, 0);
    if (std::string(preset) == "fashion-cnn-bn")
      CHECK_MESSAGE(std::fabs(want.result.loss - trained.loss) > 1e-3, preset);
    else
      CHECK_MESSAGE(want.result.loss == doctest::Approx(trained.loss).epsilon(1e-5), preset);
    for (Config c : {Config{2, 4, Remat::Always}, Config{4, 3, Remat::ExceptLast, LinkKind::Staging}}) {
      const Evaluation got = evaluate(*this, m, c, b);
      const std::string what = std::string(preset) + " " + describe(c);
      check_equal(got, want, what);
    }
  }
}

// A split's last batch can be shorter than the micro-batches planned (an evaluation of 35
// samples in batches of 12 at M = 12 ends with 11): it runs as that many micro-batches, and the
// pipeline goes on evaluating and training in step after it.
TEST_CASE_FIXTURE(test::Gpu, "a batch of fewer samples than micro-batches is evaluated in fewer, as one device evaluates it") {
  const model::Model m = model::build("gpt-mini", {"n_layer=2"});
  const model::Model w = model::with_window(m, 16);
  const pipeline::Batch full = random_batch(w, 6, 3), part = random_batch(w, 5, 4);
  const Evaluation want = evaluate(*this, w, {1, 1}, part), want_full = evaluate(*this, w, {1, 1}, full);
  for (Config c : {Config{2, 6, Remat::Always}, Config{3, 6, Remat::Never, LinkKind::Auto, pipeline::ScheduleKind::ZeroBubble},
                   Config{2, 6, Remat::Never, LinkKind::Auto, pipeline::ScheduleKind::Interleaved, 2}}) {
    const std::string what = describe(c);
    const std::vector<vk::Device*> devs = devices(*this, c.K);
    pipeline::Executor ex(w, devs, test::make_plan(w, c.K, pipeline_config(c), 6, 1, devs), {c.link, 2});
    ex.initialize_parameters(7);
    Evaluation got;
    got.result = ex.evaluate(part, &got.logits);
    check_equal(got, want, what + ": 5 samples");
    CHECK_MESSAGE(ex.evaluate(full).loss == doctest::Approx(want_full.result.loss).epsilon(1e-5), what);
    ex.train(full);  // without an update
    CHECK_MESSAGE(ex.evaluate(part).loss == got.result.loss, what);
    CHECK_MESSAGE(ex.evaluate(full).loss == doctest::Approx(want_full.result.loss).epsilon(1e-5), what);
  }
}

namespace {

// Every stage in this process, but transfers of at most `most` boundaries told apart (as the
// tags between processes limit them).
class NarrowTopology final : public pipeline::Topology {
 public:
  NarrowTopology(uint32_t stages, uint32_t most) : inner_(stages), most_(most) {}
  uint32_t stages() const override { return inner_.stages(); }
  bool local(uint32_t k) const override { return inner_.local(k); }
  uint32_t replicas() const override { return 1; }
  uint32_t replica() const override { return 0; }
  pipeline::Group& pipeline(uint32_t k) override { return inner_.pipeline(k); }
  pipeline::Group& processes() override { return inner_.processes(); }
  pipeline::Group& replica_group() override { return inner_.replica_group(); }
  uint32_t max_boundaries(uint32_t) const override { return most_; }
  std::unique_ptr<pipeline::Link> remote_link(const pipeline::RemoteEnd& end) override { return inner_.remote_link(end); }

 private:
  pipeline::OneProcess inner_;
  uint32_t most_;
};

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "a pipeline with more boundaries than its topology tells apart is refused before it allocates") {
  const model::Model m = model::build("fashion-mlp");
  const Config c{2, 4, Remat::Never, LinkKind::Auto, pipeline::ScheduleKind::Interleaved, 2};  // 4 cells, 3 boundaries
  const pipeline::Plan plan = make_plan(m, c, 8, 0);
  CHECK_THROWS_WITH_AS(pipeline::Executor(m, devices(*this, 2), plan, {LinkKind::Auto, 2}, std::make_unique<NarrowTopology>(2, 2)),
                       "4 cells have 3 boundaries between them; the processes can tell the transfers of at most 2 apart: "
                       "use fewer virtual stages",
                       UserError);
  pipeline::Executor ex(m, devices(*this, 2), plan, {LinkKind::Auto, 2}, std::make_unique<NarrowTopology>(2, 3));
  CHECK(ex.cells() == 4);
}

// The preset as the builder folds it, with each folded ReLU and the neighbour that applied
// it (the maxpool2d after it, else the linear before it) rebuilt apart.
// With `convolutions`, a conv2d that took the relu and maxpool2d after it too (the presets'
// take stride 1 and padding 1); else those three stay as they are.
model::Model unfolded(const std::string& preset, bool convolutions) {
  model::Model m = model::build(preset);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    if (m.layers[i]->kind() != "relu" || !m.layers[i]->is_view()) continue;
    const auto* conv = dynamic_cast<const model::Conv2d*>(m.layers[i - 1].get());
    if (conv && conv->pools()) {
      if (!convolutions) continue;
      const std::vector<model::ParamSpec> ps = conv->params();
      const std::vector<int64_t>& w = ps[0].shape;  // (out, in, k, k)
      const std::string prefix = ps[0].name.substr(0, ps[0].name.size() - std::string("weight").size());
      m.layers[i - 1] = std::make_unique<model::Conv2d>(conv->input_shape(), uint32_t(w[1]), uint32_t(w[0]),
                                                        uint32_t(w[2]), 1, 1, ps.size() == 2, prefix);
    }
    const model::Shape in = m.layers[i - 1]->output_shape();
    m.layers[i] = std::make_unique<model::ReLU>(in);
    if (i + 1 < m.layers.size() && m.layers[i + 1]->kind() == "maxpool2d") {
      m.layers[i + 1] = std::make_unique<model::MaxPool2d>(in, 2, 2);  // the presets' pools
      continue;
    }
    const model::Layer& linear = *m.layers[i - 1];
    REQUIRE(linear.kind() == "linear");
    const std::vector<model::ParamSpec> ps = linear.params();
    const std::string prefix = ps[0].name.substr(0, ps[0].name.size() - std::string("weight").size());
    m.layers[i - 1] = std::make_unique<model::Linear>(linear.input_shape(), linear.input_shape().back(), in.back(),
                                                      ps.size() == 2, prefix);
  }
  return m;
}

TEST_CASE_FIXTURE(test::Gpu, "a ReLU folded into its neighbour trains as the layers apart") {
  // Each preset as built (every relu folded into the maxpool2d after it or the linear before
  // it; fashion-cnn's convolutions keep theirs) against the same model with those layers
  // apart: the same losses, gradients and parameters after three SGD steps, bit for bit, on
  // one device; and cut in two where the planner cuts, under every schedule
  // and, with a split backward (zb), the folded linear's deferred gradient masked.
  for (const char* preset : {"fashion-cnn", "fashion-mlp"}) {
    const model::Model folded = model::build(preset), apart = unfolded(preset, false);
    size_t views = 0;
    for (size_t i = 0; i < folded.layers.size(); ++i)
      views += folded.layers[i]->is_view() && !apart.layers[i]->is_view();
    // fashion-cnn's other relus and pools go into its convolutions.
    CHECK(views == (std::string(preset) == "fashion-cnn" ? 1u : 2u));
    const std::vector<pipeline::Batch> batches{random_batch(folded, 6, 1), random_batch(folded, 6, 2),
                                               random_batch(folded, 6, 3)};
    const Outcome want = test::run(apart, devices(*this, 1), {}, batches, 3);
    const Outcome got = test::run(folded, devices(*this, 1), {}, batches, 3);
    CHECK(got.losses == want.losses);
    CHECK(got.grads == want.grads);
    CHECK(got.params == want.params);
    for (pipeline::ScheduleKind kind : {pipeline::ScheduleKind::GPipe, pipeline::ScheduleKind::ZeroBubble}) {
      test::PipelineConfig c;
      c.M = 2, c.schedule = kind;
      const Outcome cut = test::run(folded, devices(*this, 2), c, batches, 3);
      check_equal(cut, want, std::string(preset) + " in two stages, " + test::describe(c), true);
    }
  }
}

TEST_CASE_FIXTURE(test::Gpu, "a conv2d with its ReLU and pooling folded in trains as the three layers apart") {
  // fashion-cnn's first convolution takes its relu and maxpool2d (ops/conv2d_pool.h): the
  // same training as the layers apart to fp32's rounding (the convolution sums in another
  // order than the matrix form), on one device and on two stages under a split backward (zb:
  // the pooled gradient deferred, spread back in the W pass).
  const model::Model folded = model::build("fashion-cnn"), apart = unfolded("fashion-cnn", true);
  REQUIRE(static_cast<const model::Conv2d&>(*folded.layers[0]).pools());
  REQUIRE_FALSE(static_cast<const model::Conv2d&>(*apart.layers[0]).pools());
  const std::vector<pipeline::Batch> batches{random_batch(folded, 6, 1), random_batch(folded, 6, 2),
                                             random_batch(folded, 6, 3)};
  const Outcome want = test::run(apart, devices(*this, 1), {}, batches, 3);
  check_equal(test::run(folded, devices(*this, 1), {}, batches, 3), want, "fashion-cnn folded, one device", true);
  test::PipelineConfig c;
  c.M = 2, c.schedule = pipeline::ScheduleKind::ZeroBubble;
  check_equal(test::run(folded, devices(*this, 2), c, batches, 3), want, "fashion-cnn folded, " + test::describe(c), true);
}

}  // namespace pipeline_executor_test
