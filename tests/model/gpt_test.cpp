// Embedding, LmHead and a GPT block's two layers (GptAttention, GptMlp) on the GPU against CPU
// references; the block's composed reference is itself checked against finite differences.
#include <doctest/doctest.h>

#include "check.h"
#include "gpt_reference.h"
#include "gpu.h"
#include "harness.h"
#include "model/layers.h"
#include "ref/embedding.h"
#include "ref/linear.h"

namespace model_gpt_test {

using namespace brigade;

namespace {

constexpr double kAtol = 2e-5, kRtol = 2e-4;

void check(std::span<const float> got, const std::vector<double>& want, const std::string& what) {
  test::check_close(got, test::to_float(want), kAtol, kRtol, what);
}

std::vector<std::vector<double>> to_double(const std::vector<std::vector<float>>& v) {
  std::vector<std::vector<double>> out;
  for (const auto& t : v) out.push_back(test::to_double(t));
  return out;
}

const test::BlockShape kBlock{3, 5, 8, 2};  // rows, T, C, NH

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "embedding forward and backward match the reference") {
  const uint32_t rows = 3, V = 11, block_size = 9, T = 7, C = 6;
  const model::Embedding layer(V, block_size, T, C);
  CHECK(layer.integer_input());
  CHECK(layer.output_shape() == model::Shape{T, C});
  const auto p = layer.params();
  REQUIRE(p.size() == 2);
  CHECK(p[0].name == "transformer.wte.weight");
  CHECK(p[0].shape == std::vector<int64_t>{V, C});
  CHECK(p[1].name == "transformer.wpe.weight");
  CHECK(p[1].shape == std::vector<int64_t>{block_size, C});
  const test::LayerData d = test::random_data(layer, rows, 11, V);
  test::LayerRun run(device(), layer, rows, d);
  run.forward();
  run.backward();
  const auto wte = test::to_double(d.params[0]), wpe = test::to_double(d.params[1]),
             dy = test::to_double(d.dy);
  std::vector<double> y(rows * T * C), dwte = test::to_double(d.grads[0]),
                                       dwpe = test::to_double(d.grads[1]);
  ref::embedding_forward<double>(d.tokens, wte, wpe, y, rows, T, C, V);
  ref::embedding_backward<double>(dy, d.tokens, dwte, dwpe, rows, T, C, V);
  check(run.y(), y, "embedding y");
  check(run.grad(0), dwte, "embedding dwte");
  check(run.grad(1), dwpe, "embedding dwpe");
  run.check_guards();
  CHECK_THROWS_WITH_AS(model::Embedding(V, 4, 5, C), doctest::Contains("exceeds block_size 4"),
                       UserError);
}

TEST_CASE_FIXTURE(test::Gpu, "lm_head forward and backward match the reference") {
  const uint32_t rows = 3, T = 5, C = 6, V = 11, n = rows * T;
  const model::LmHead layer(T, C, V);
  const auto p = layer.params();
  REQUIRE(p.size() == 1);
  CHECK(p[0].name == "transformer.wte.weight");  // tied to the embedding
  CHECK(p[0].shape == std::vector<int64_t>{V, C});
  const test::LayerData d = test::random_data(layer, rows, 12);
  test::LayerRun run(device(), layer, rows, d);
  run.forward();
  run.backward();
  const auto x = test::to_double(d.x), w = test::to_double(d.params[0]), dy = test::to_double(d.dy);
  std::vector<double> y(n * V), dx = test::to_double(d.dx), dw = test::to_double(d.grads[0]);
  ref::linear_forward<double>(x, w, {}, y, n, C, V);
  ref::linear_backward_data<double>(dy, w, dx, n, C, V);
  ref::linear_backward_weight<double>(dy, x, dw, {}, n, C, V);
  check(run.y(), y, "lm_head y");
  check(run.dx(), dx, "lm_head dx");
  check(run.grad(0), dw, "lm_head dwte");
  run.check_guards();
}

TEST_CASE("a GPT block's two layers declare nanoGPT's parameters") {
  const model::GptAttention attention(2, 16, 64, 4, 6);
  const model::GptMlp mlp(2, 16, 64, 6);
  std::vector<model::ParamSpec> p = attention.params();
  for (const model::ParamSpec& spec : mlp.params()) p.push_back(spec);
  const std::vector<std::pair<std::string, std::vector<int64_t>>> want = {
      {"transformer.h.2.ln_1.weight", {64}},       {"transformer.h.2.ln_1.bias", {64}},
      {"transformer.h.2.attn.c_attn.weight", {192, 64}}, {"transformer.h.2.attn.c_attn.bias", {192}},
      {"transformer.h.2.attn.c_proj.weight", {64, 64}},  {"transformer.h.2.attn.c_proj.bias", {64}},
      {"transformer.h.2.ln_2.weight", {64}},       {"transformer.h.2.ln_2.bias", {64}},
      {"transformer.h.2.mlp.c_fc.weight", {256, 64}},    {"transformer.h.2.mlp.c_fc.bias", {256}},
      {"transformer.h.2.mlp.c_proj.weight", {64, 256}},  {"transformer.h.2.mlp.c_proj.bias", {64}}};
  REQUIRE(p.size() == want.size());
  for (size_t i = 0; i < p.size(); ++i) {
    CHECK(p[i].name == want[i].first);
    CHECK(p[i].shape == want[i].second);
  }
  CHECK(p[2].init == model::Init::Normal);
  CHECK(p[2].scale == doctest::Approx(0.02));
  CHECK(p[4].scale == doctest::Approx(0.02 / std::sqrt(12.0)));
  CHECK(p[10].scale == doctest::Approx(0.02 / std::sqrt(12.0)));
  CHECK(p[3].init == model::Init::Zeros);
  CHECK(p[6].init == model::Init::Ones);
  // Per token: the attention keeps 5 C + NH + 2 statistics, the MLP 9 C + 2, and x1 between
  // them is the attention's output.
  const auto saved_floats = [](const model::Layer& l) {
    uint64_t n = 0;
    for (const auto& spec : l.saved()) n += spec.per_sample;
    return n;
  };
  CHECK(saved_floats(attention) == 16 * (5 * 64 + 4 + 2));
  CHECK(saved_floats(mlp) == 16 * (9 * 64 + 2));
  for (const model::Layer* l : {static_cast<const model::Layer*>(&attention), static_cast<const model::Layer*>(&mlp)}) {
    uint64_t param_floats = 0;
    for (const auto& spec : l->params()) param_floats += spec.elements();
    const model::Cost cost = l->cost();
    CHECK(cost.param_bytes == param_floats * 4);
    CHECK(cost.activation_bytes == (16 * 64 + saved_floats(*l)) * 4);
  }
  CHECK(attention.cost().flops > 2.0 * 16 * 4 * 64 * 64);  // more than its Linear layers alone
  CHECK(mlp.cost().flops > 2.0 * 16 * 8 * 64 * 64);
  CHECK_THROWS_WITH_AS(model::GptAttention(0, 16, 66, 4, 1),
                       doctest::Contains("n_embd 66 is not divisible by n_head 4"), UserError);
}

namespace {

// The reference of one half (attention or MLP) checked against finite differences, then the
// layer on the GPU against the reference.
template <class Layer, class Forward, class Backward>
void check_reference_gradients(const Layer& layer, const test::BlockShape& s, Forward forward, Backward backward,
                               const std::string& name) {
  const test::LayerData d = test::random_data(layer, s.B, 13);
  const auto x = test::to_double(d.x), r = test::to_double(d.dy);
  const auto params = to_double(d.params);
  std::vector<std::vector<double>> grads;
  for (const auto& p : params) grads.emplace_back(p.size(), 0.0);
  std::vector<double> dx(x.size(), 0.0);
  const auto f = forward(x, params, s);
  backward(x, params, f, r, dx, grads, s);
  auto loss = [&](const std::vector<double>& xv, const std::vector<std::vector<double>>& pv) {
    return test::dot(forward(xv, pv, s).y, r);
  };
  test::check_gradient([&](const std::vector<double>& v) { return loss(v, params); }, x, dx, 1e-5, 1e-6, name + " dx");
  const auto specs = layer.params();
  for (size_t i = 0; i < params.size(); ++i) {
    auto with = [&](const std::vector<double>& v) {
      auto pv = params;
      pv[i] = v;
      return loss(x, pv);
    };
    test::check_gradient(with, params[i], grads[i], 1e-5, 1e-6, name + " d" + specs[i].name);
  }
}

template <class Layer, class Forward, class Backward>
void check_against_reference(vk::Device& device, const Layer& layer, const test::BlockShape& s, Forward forward,
                             Backward backward, const std::string& name) {
  const test::LayerData d = test::random_data(layer, s.B, 14);
  test::LayerRun run(device, layer, s.B, d);
  run.forward();
  run.backward();
  const auto x = test::to_double(d.x), dy = test::to_double(d.dy);
  const auto params = to_double(d.params);
  auto grads = to_double(d.grads);
  // Each half writes dx (writes_input_gradient): what the buffer held (d.dx) is not read.
  REQUIRE(layer.writes_input_gradient());
  std::vector<double> dx(d.dx.size(), 0.0);
  const auto f = forward(x, params, s);
  backward(x, params, f, dy, dx, grads, s);
  check(run.y(), f.y, name + " y");
  const auto saved = layer.saved();
  const auto want = f.saved();
  REQUIRE(saved.size() == want.size());
  for (size_t i = 0; i < saved.size(); ++i) check(run.saved(i), *want[i], name + " saved " + saved[i].name);
  check(run.dx(), dx, name + " dx");
  const auto specs = layer.params();
  for (size_t i = 0; i < specs.size(); ++i) check(run.grad(i), grads[i], name + " d" + specs[i].name);
  run.check_guards();
}

}  // namespace

TEST_CASE("a GPT block's references (attention, MLP) agree with finite differences") {
  const test::BlockShape s{2, 4, 8, 2};
  check_reference_gradients(model::GptAttention(0, s.T, s.C, s.NH, 2), s,
                            test::attention_half_forward<double>, test::attention_half_backward<double>,
                            "gpt_attention");
  check_reference_gradients(model::GptMlp(0, s.T, s.C, 2), s, test::mlp_half_forward<double>,
                            test::mlp_half_backward<double>, "gpt_mlp");
}

TEST_CASE_FIXTURE(test::Gpu, "a GPT block's attention and MLP forward and backward match the composed reference") {
  const test::BlockShape& s = kBlock;
  check_against_reference(device(), model::GptAttention(1, s.T, s.C, s.NH, 2), s,
                          test::attention_half_forward<double>, test::attention_half_backward<double>,
                          "gpt_attention");
  check_against_reference(device(), model::GptMlp(1, s.T, s.C, 2), s, test::mlp_half_forward<double>,
                          test::mlp_half_backward<double>, "gpt_mlp");
}

TEST_CASE_FIXTURE(test::Gpu, "lm_head's split backward (input gradient, then parameter gradients) equals its whole backward") {
  const uint32_t rows = 3, T = 5, C = 6, V = 11;
  const model::LmHead layer(T, C, V);
  const auto deferred = layer.deferred();
  REQUIRE(deferred.size() == 1);
  CHECK(deferred[0].floats(rows) == rows * T * V);
  test::check_split_backward(device(), layer, rows, test::random_data(layer, rows, 24));
}

TEST_CASE_FIXTURE(test::Gpu, "a GPT block's split backward (input gradient, then parameter gradients) equals its whole backward") {
  const test::BlockShape& s = kBlock;
  const model::GptAttention attention(1, s.T, s.C, s.NH, 2);
  const model::GptMlp mlp(1, s.T, s.C, 2);
  const auto deferred_floats = [&](const model::Layer& l) {
    uint64_t n = 0;
    for (const auto& spec : l.deferred()) n += spec.floats(s.B);
    return n;
  };
  CHECK(attention.deferred().size() == 3);
  CHECK(deferred_floats(attention) == uint64_t(s.B) * s.T * 5 * s.C);  // dy, dqkv, dln_1
  CHECK(mlp.deferred().size() == 3);
  CHECK(deferred_floats(mlp) == uint64_t(s.B) * s.T * 6 * s.C);  // dy, dfc, dln_2
  for (const model::Layer* layer : {static_cast<const model::Layer*>(&attention), static_cast<const model::Layer*>(&mlp)}) {
    test::LayerData d = test::random_data(*layer, s.B, 25);
    test::check_split_backward(device(), *layer, s.B, d);
    d.dx.clear();  // as the model's first layer
    test::check_split_backward(device(), *layer, s.B, d);
  }
}

}  // namespace model_gpt_test
