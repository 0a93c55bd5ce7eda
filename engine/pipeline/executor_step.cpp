// The host part of the Step action: gradients of parameters tied across cells are summed
// (in cell order, so every copy gets the same bits); every cell reduces its gradients to
// squared norms, which both clip (summed in cell order into the global coefficient) and
// check that the loss and every gradient are finite. A step with anything non-finite
// updates nothing: the stage of the cell with the problem throws NonFinite, the others skip.
#include <algorithm>
#include <cmath>

#include "pipeline/executor.h"
#include "pipeline/executor_shared.h"

namespace brigade::pipeline {

std::optional<double> Executor::step_stage(uint32_t k, const Update& update) {
  Shared& sh = *shared_;
  const uint32_t K = stages(), C = cells();
  std::vector<uint32_t> mine;  // this stage's cells
  for (uint32_t c = k; c < C; c += K) mine.push_back(c);
  if (!sh.tied.empty()) {  // parameters held by more than one cell
    for (uint32_t c : mine) {
      Stage& s = *cells_[c];
      const auto& held = s.trainable();
      for (auto& [name, copies] : sh.tied) {
        if (std::find(held.begin(), held.end(), name) == held.end()) continue;
        copies[c].resize(s.gradient(name).size() / kFloat);
        vk::download(s.gradient(name), copies[c].data(), s.gradient(name).size());
      }
    }
    sh.barrier->arrive_and_wait();
    if (abort_.raised()) return std::nullopt;
    for (uint32_t c : mine)
      for (auto& [name, copies] : sh.tied) {
        if (copies[c].empty()) continue;
        std::vector<float> sum(copies[c].size(), 0.0f);
        for (uint32_t j : sh.holders.at(name))
          for (size_t e = 0; e < sum.size(); ++e) sum[e] += copies[j][e];
        vk::upload(cells_[c]->gradient(name), sum.data(), sum.size() * kFloat);
      }
  }
  for (uint32_t c : mine) {
    Shared::Norm& norm = sh.norms[c];
    if (!norm.in_backward) {
      norm.commands->reset();
      norm.reduce->record(*norm.commands);
      norm.commands->run();
    }
    std::vector<double> each;
    sh.squared[c] = norm.reduce->squared(&each);
    sh.bad[c].clear();
    sh.bad_param[c].clear();
    for (size_t i = each.size(); i-- > 0;)  // the deepest first: backward reaches it first
      if (!std::isfinite(each[i])) {
        sh.bad[c] = norm.names[i];
        break;
      }
    if (cells_[c]->layout().last_stage) {
      float loss = 0;
      vk::download(cells_[c]->loss(), &loss, kFloat);
      sh.loss = loss;
    }
  }
  sh.barrier->arrive_and_wait();
  if (abort_.raised()) return std::nullopt;
  if (!std::isfinite(sh.loss)) {  // every stage sees it: look for a parameter that already was
    for (uint32_t c : mine) sh.bad_param[c] = first_non_finite_parameter(c);
    sh.barrier->arrive_and_wait();
    if (abort_.raised()) return std::nullopt;
  }
  // Who reports: the shallowest cell with a non-finite parameter, else the deepest with a
  // non-finite gradient, else the last (the loss alone).
  int culprit = -1;
  for (uint32_t j = C; j-- > 0;)
    if (!sh.bad_param[j].empty()) culprit = int(j);
  for (uint32_t j = 0; j < C && culprit < 0; ++j)
    if (!sh.bad[C - 1 - j].empty()) culprit = int(C - 1 - j);
  if (culprit < 0 && !std::isfinite(sh.loss)) culprit = int(C - 1);
  if (culprit >= 0) {
    if (uint32_t(culprit) % K == k) throw NonFinite(non_finite_message(uint32_t(culprit), update.step.t));
    return std::nullopt;
  }
  double total = 0;
  for (double v : sh.squared) total += v;  // in cell order: every stage gets the same bits
  if (k == 0) sh.grad_norm = std::sqrt(total);
  if (update.max_norm > 0) return optim::clip(total, update.max_norm).grad_scale;
  return 1.0;
}

std::string Executor::first_non_finite_parameter(uint32_t c) {
  Stage& s = *cells_[c];
  std::vector<vk::View> params;
  std::vector<std::string> names;
  for (uint32_t l = s.layout().first; l < s.layout().last; ++l)
    for (const model::ParamSpec& p : model_.layers[l]->params())
      if (p.kind != model::ParamKind::State) params.emplace_back(s.param(p.name)), names.push_back(p.name);
  optim::GradNorm norm(s.device(), params);
  vk::Commands cmd(s.device(), "cell " + std::to_string(c) + " parameter check");
  norm.record(cmd);
  cmd.run();
  std::vector<double> each;
  norm.squared(&each);
  for (size_t i = 0; i < each.size(); ++i)
    if (!std::isfinite(each[i])) return names[i];
  return {};
}

std::string Executor::non_finite_message(uint32_t c, uint64_t step) const {
  const Shared& sh = *shared_;
  const StageLayout& l = plan_.stages[c];
  const uint32_t k = c % stages();
  const std::string where = (cells() > stages() ? "cell " + std::to_string(c) + " of " : std::string()) +
                            "stage " + std::to_string(k) + " (device " + std::to_string(devices_[k]->info().index) +
                            ", " + devices_[k]->info().name + ")";
  auto layer_of = [&](const std::string& name) {
    for (uint32_t i = l.first; i < l.last; ++i)
      for (const model::ParamSpec& p : model_.layers[i]->params())
        if (p.name == name) return "layer " + std::to_string(i) + ", " + model_.layers[i]->kind();
    return std::string("layer ?");
  };
  std::string what = "step " + std::to_string(step) + ": ";
  if (!std::isfinite(sh.loss)) what += "the loss is " + std::string(std::isnan(sh.loss) ? "NaN" : "infinite") + "; ";
  if (!sh.bad_param[c].empty())
    what += "parameter '" + sh.bad_param[c] + "' (" + layer_of(sh.bad_param[c]) + ", on " + where +
            ") was already not finite";
  else if (!sh.bad[c].empty())
    what += "the gradient of '" + sh.bad[c] + "' (" + layer_of(sh.bad[c]) + ", on " + where +
            ") has a non-finite norm, the deepest such layer";
  else
    what += "every parameter and gradient is finite, so the forward pass overflowed (the last layer, " +
            std::to_string(l.last - 1) + ", " + model_.layers[l.last - 1]->kind() + ", is on " + where + ")";
  return what + "; no parameter was updated";
}

}  // namespace brigade::pipeline
