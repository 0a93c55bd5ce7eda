// The host part of the Step action, as sums over a Group (the stage threads of this process,
// or the processes of a multi-process run): gradients are summed over data-parallel
// replicas, then those of parameters tied across cells (every copy gets the same bits);
// every cell reduces its gradients to squared norms, which both clip (summed in cell order
// into the global coefficient) and check that the loss and every gradient are finite. A
// step with anything non-finite updates nothing: the stage of the cell with the problem
// throws NonFinite, the others skip; under loss scaling, gradients that are not finite while
// the loss and parameters are mean the scale (above 1) was too large: every stage skips the
// update.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "ops/batchnorm.h"
#include "optim/loss_scale.h"
#include "pipeline/executor_shared.h"
#include "pipeline/stage_runner.h"

namespace brigade::pipeline {

std::optional<double> StageRunner::step_sums() {
  const Executor::Shared& sh = *ex_.shared_;
  Executor::RunState& st = *ex_.state_;
  const uint32_t K = ex_.stages(), C = ex_.cells();
  const auto& cells = ex_.cells_;
  Topology& topology = *ex_.topology_;
  std::vector<uint32_t> mine;  // this stage's cells
  for (uint32_t c = k_; c < C; c += K) mine.push_back(c);
  auto download = [](const vk::Buffer& b) {
    std::vector<float> v(b.size() / kFloat);
    vk::download(b, v.data(), b.size());
    return v;
  };
  // Data-parallel replicas: every gradient summed over the replicas of this stage (each
  // replica's loss is its share of the whole batch's), and BatchNorm's statistics
  // accumulators merged, as if one process had run every micro-batch.
  Group& replicas = topology.replica_group();
  // The gradients were summed as each cell's last backward finished (sum_over_replicas).
  if (sums_) {
    const bool ok = sums_->finish();
    sums_.reset();
    if (!ok) return std::nullopt;
  }
  if (replicas.size() > 1)
    for (uint32_t c : mine) {
      Cell& s = *cells[c];
      for (const model::ParamSpec& p : ex_.plan_.cells[c].params)
        if (p.kind == model::ParamKind::State) {  // BatchNorm's, the only kind there is
          std::vector<float> words = download(s.param(p.name));
          std::vector<double> sums = ops::batchnorm_stats_to_sums(words);
          if (!replicas.sum(sums)) return std::nullopt;
          ops::batchnorm_stats_from_sums(sums, words);
          vk::upload(s.param(p.name), words.data(), words.size() * kFloat);
        }
    }
  // Parameters held by more than one cell: every copy gets the sum of the cells' gradients.
  if (!sh.tied.empty()) {
    const auto copy = [&](uint32_t c, bool to_host) {
      const Executor::Shared::TiedCopies& copies = sh.tied_copies[c];
      vk::Commands& cmd = to_host ? *copies.to_host : *copies.back;
      cmd.reset();
      cells[c]->copy_tied_gradients(cmd, to_host);
      cmd.run();
    };
    for (uint32_t c : mine)
      if (sh.tied_copies[c].to_host) copy(c, true);
    std::vector<float> all;
    for (const auto& [name, n] : sh.tied) {
      std::vector<float> sum(n, 0.0f);
      for (uint32_t c : mine)
        if (cells[c]->holds(name)) {
          const float* g = cells[c]->tied_host(name);
          for (size_t e = 0; e < n; ++e) sum[e] += g[e];
        }
      all.insert(all.end(), sum.begin(), sum.end());
    }
    if (!group_.sum(all)) return std::nullopt;
    uint64_t at = 0;
    for (const auto& [name, n] : sh.tied) {
      for (uint32_t c : mine)
        if (cells[c]->holds(name)) std::memcpy(cells[c]->tied_host(name), all.data() + at, n * sizeof(float));
      at += n;
    }
    for (uint32_t c : mine)
      if (sh.tied_copies[c].back) copy(c, false);
  }
  // Per cell its squared gradient norm and whether a gradient is not finite, then the loss.
  std::vector<double> stats(2 * C + 1, 0.0);
  for (uint32_t c : mine) {
    const Executor::Shared::Norm& norm = sh.norms[c];
    if (!norm.in_backward) {
      norm.commands->reset();
      norm.reduce->record(*norm.commands);
      norm.commands->run();
    }
    std::vector<double> each;
    stats[c] = norm.reduce->squared(&each);
    st.bad[c].clear();
    st.bad_param[c].clear();
    for (size_t i = each.size(); i-- > 0;)  // the deepest first: backward reaches it first
      if (!std::isfinite(each[i])) {
        st.bad[c] = norm.names[i];
        stats[C + c] = 1;
        break;
      }
    if (cells[c]->layout().last_cell) {
      float loss = 0;
      vk::download(cells[c]->loss(), &loss, kFloat);
      stats[2 * C] = loss;
    }
  }
  if (!group_.sum(stats)) return std::nullopt;
  std::vector<double> loss{stats[2 * C]};
  if (!replicas.sum(loss)) return std::nullopt;
  // One thread writes the step's results: the first stage this process runs.
  const bool writer = k_ == sh.writer;
  if (writer) st.loss = loss[0];
  std::vector<double> bad_param(C, 0.0);
  // Every stage sees the same loss and flags: on anything non-finite, look for a parameter
  // that already was. (A NaN weight need not make the loss NaN: on an NVIDIA H200 the loss
  // stayed finite and only the gradients showed it.)
  const bool any_bad = !std::isfinite(loss[0]) ||
                       std::any_of(stats.begin() + C, stats.begin() + 2 * C, [](double f) { return f != 0; });
  if (any_bad) {
    for (uint32_t c : mine) {
      st.bad_param[c] = first_non_finite_parameter(c);
      bad_param[c] = !st.bad_param[c].empty();
    }
    if (!group_.sum(bad_param)) return std::nullopt;
  }
  // Who reports: the shallowest cell with a non-finite parameter, else the deepest with a
  // non-finite gradient, else the last (the loss alone). Among replicas, the first.
  int culprit = -1;
  for (uint32_t j = C; j-- > 0;)
    if (bad_param[j] != 0) culprit = int(j);
  for (uint32_t j = 0; j < C && culprit < 0; ++j)
    if (stats[C + (C - 1 - j)] != 0) culprit = int(C - 1 - j);
  if (culprit < 0 && !std::isfinite(loss[0])) culprit = int(C - 1);
  const double S = update_.loss_scale;
  skipped_ = culprit >= 0 && update_.skips && S > optim::LossScale::kMinimum && bad_param[culprit] == 0 &&
             std::isfinite(loss[0]);
  if (skipped_) {
    if (writer) st.skipped = true, st.grad_norm = INFINITY;
    return 0.0;
  }
  if (culprit >= 0) {
    const uint32_t named_by = uint32_t(culprit) % K;  // the stage whose thread names it, in replica 0
    if (named_by == k_ && topology.replica() == 0)
      throw NonFinite(non_finite_message(uint32_t(culprit), update_.run_step(), loss[0]));
    // Where that stage runs elsewhere (another rank's, or another replica's), this process's
    // first stage stops the step too, rather than return as if it were done.
    if ((!topology.local(named_by) || topology.replica() != 0) && k_ == topology.local_stages().front())
      throw NonFinite("step " + std::to_string(update_.run_step()) + ": stage " + std::to_string(named_by) +
                      (topology.replicas() > 1 ? " of replica 0" : "") +
                      " found a value that is not finite, and its rank names it; no parameter moved");
    return std::nullopt;
  }
  double total = 0;
  for (uint32_t c = 0; c < C; ++c) total += stats[c];  // the same bits on every stage
  total /= S * S;  // the gradients hold S times their values
  if (writer) st.grad_norm = std::sqrt(total);
  if (update_.max_norm > 0) return optim::clip(total, update_.max_norm).grad_scale / S;
  return 1.0 / S;
}

std::string StageRunner::first_non_finite_parameter(uint32_t c) {
  Cell& s = *ex_.cells_[c];
  const model::Model& model = ex_.model_;
  // The trainable parameters the gradient norm covers are summed by that norm's own tables
  // and partial sums, run over the parameter arena (the gradients' sums were read already):
  // the check allocates nothing the plan does not hold. The others (a tied copy another cell
  // checks, BatchNorm's running statistics) are read back here.
  const Executor::Shared::Norm& norm = ex_.shared_->norms[c];
  std::map<std::string, double> sums;
  if (!norm.names.empty()) {
    const vk::Buffer& grads = s.gradient(norm.names.front()).whole();
    vk::Commands cmd(s.device(), "cell " + std::to_string(c) + " parameter check");
    norm.reduce->record(cmd, grads, s.param(norm.names.front()).whole());
    cmd.run();
    std::vector<double> each;
    norm.reduce->squared(&each);
    for (size_t i = 0; i < each.size(); ++i) sums[norm.names[i]] = each[i];
  }
  for (uint32_t l = s.layout().first; l < s.layout().last; ++l)
    for (const model::ParamSpec& p : model.layers[l]->params()) {
      if (p.kind == model::ParamKind::State) continue;
      const auto it = sums.find(p.name);
      // A sum of squares also overflows for huge finite values: those are read back to be sure.
      if (it != sums.end() && std::isfinite(it->second)) continue;
      const vk::Buffer& b = s.param(p.name);
      std::vector<float> values(b.size() / kFloat);
      vk::download(b, values.data(), b.size());
      if (std::any_of(values.begin(), values.end(), [](float v) { return !std::isfinite(v); })) return p.name;
    }
  return {};
}

std::string StageRunner::non_finite_message(uint32_t c, uint64_t step, double loss) const {
  const Executor::RunState& st = *ex_.state_;
  const model::Model& model = ex_.model_;
  const CellLayout& l = ex_.plan_.cells[c];
  const std::string where = (ex_.cells() > ex_.stages() ? "cell " + std::to_string(c) + " of " : std::string()) +
                            "stage " + std::to_string(k_) + " (device " + std::to_string(dev_.info().index) +
                            ", " + dev_.info().name + ")";
  auto layer_of = [&](const std::string& name) {
    for (uint32_t i = l.first; i < l.last; ++i)
      for (const model::ParamSpec& p : model.layers[i]->params())
        if (p.name == name) return "layer " + std::to_string(i) + ", " + model.layers[i]->kind();
    return std::string("layer ?");
  };
  std::string what = "step " + std::to_string(step) + ": ";
  if (!std::isfinite(loss)) what += "the loss is " + std::string(std::isnan(loss) ? "NaN" : "infinite") + "; ";
  if (!st.bad_param[c].empty())
    what += "parameter '" + st.bad_param[c] + "' (" + layer_of(st.bad_param[c]) + ", on " + where +
            ") was already not finite";
  else if (!st.bad[c].empty())
    what += "the gradient of '" + st.bad[c] + "' (" + layer_of(st.bad[c]) + ", on " + where +
            ") has a non-finite norm, the deepest such layer";
  else
    what += "every parameter and gradient is finite, so the forward pass overflowed (the last layer, " +
            std::to_string(l.last - 1) + ", " + model.layers[l.last - 1]->kind() + ", is on " + where + ")";
  return what + "; no parameter was updated";
}

}  // namespace brigade::pipeline
