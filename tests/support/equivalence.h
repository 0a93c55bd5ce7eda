// GPipe's promise as a test harness: run a model through a pipeline on given devices and
// compare its loss, gradients and parameters with another run's (the single-device one).
// Shared by the pipeline suite (logical devices of one driver) and the vendors suite
// (lavapipe and SwiftShader in one pipeline).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "check.h"
#include "model/model.h"
#include "ops/precision.h"
#include "pipeline/batch.h"
#include "pipeline/executor.h"
#include "pipeline/plan.h"
#include "vk/device.h"

namespace brigade::test {

struct PipelineConfig {
  uint32_t M = 1;
  pipeline::Remat remat = pipeline::Remat::Never;
  pipeline::LinkKind link = pipeline::LinkKind::Auto;
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::GPipe;
  uint32_t V = 1;  // cells per stage (interleaved)
  // Storage precision: one for every stage or one per stage (empty: fp32), or one per layer.
  std::vector<ops::Precision> precision = {};
  std::vector<ops::Precision> layer_precision = {};
  double loss_scale = 1;  // pipeline::Update::loss_scale of every step
  // Every 16-bit layer on fp32 copies, even where its kernels take 16 bits: the same bits,
  // more passes; the reference the 16-bit kernels are held to.
  bool fp32_copies = false;
  // With layer_precision on one device: which layers take 16 bits themselves (as the devices of
  // the pipeline being matched said), in place of the device's own answers.
  std::vector<bool> layer_stores_half = {};
  // 16 bits: the initial weights of matrix products (model::ParamSpec::product) rounded to it
  // on the host, the values a 16-bit stage's kernels read through their copies; not a weight
  // another layer reads as it is (the GPT embedding's, tied to lm_head).
  ops::Precision round_products = ops::Precision::Fp32;
  // Planned for forward passes only (pipeline::PlanOptions::training false): evaluation.
  bool forward_only = false;
};

// "1f1b M=4 remat always link host" (K comes from the devices).
std::string describe(const PipelineConfig& c);

// The update of the training runs: SGD (momentum 0.9, weight decay 1e-4) or AdamW (eps 1e-6,
// weight decay 0.1), at a rate of 0.05 or 1e-3, with global-norm clipping at 0.5, which the
// gradients of these tests exceed.
enum class Update { Sgd, AdamW };

struct Outcome {
  double loss = 0;
  std::map<std::string, std::vector<float>> grads;   // after the (last) backward
  std::map<std::string, std::vector<float>> params;  // after the (last) step
  std::vector<double> losses;                        // one per step
};

// With `devices`, the layers their kernels take in 16 bits do (unless c.fp32_copies); without,
// every 16-bit layer runs on fp32 copies.
pipeline::Plan make_plan(const model::Model& m, uint32_t K, const PipelineConfig& c, uint32_t rows,
                         uint32_t optimizer_states, const std::vector<vk::Device*>& devices = {});

// Runs `steps` mini-batches (0: one forward and backward without an update) with the
// model's initial parameters of seed 7, one stage per device of `devices`.
Outcome run(const model::Model& m, const std::vector<vk::Device*>& devices, const PipelineConfig& c,
            const std::vector<pipeline::Batch>& batches, uint32_t steps, Update update = Update::Sgd);

// Losses, gradients and (with `params`) parameters of `got` equal `want` to fp32 rounding;
// parameters to within `param_atol` at least, gradients to within `grad_rel` of their largest
// magnitude at least.
void check_equal(const Outcome& got, const Outcome& want, const std::string& what, bool params,
                 double param_atol = 0, double grad_rel = 0);

struct Evaluation {
  pipeline::EvalResult result;
  std::vector<float> logits;
};

// Evaluates `b` with the initial parameters of seed 7; checks on the way that evaluating
// changes nothing and that the pipeline can train and evaluate again afterwards.
Evaluation evaluate(const model::Model& m, const std::vector<vk::Device*>& devices,
                    const PipelineConfig& c, const pipeline::Batch& b);

// The loss and correct count of `got` equal `want`'s, its outputs to fp32 rounding.
void check_equal(const Evaluation& got, const Evaluation& want, const std::string& what);

}  // namespace brigade::test
