#include "pipeline/profile.h"

#include <algorithm>

#include "pipeline/plan.h"
#include "pipeline/stage.h"
#include "vk/check.h"

namespace brigade::pipeline {

std::vector<double> profile_layers(vk::Device& device, const model::Model& m, uint32_t rows,
                                   uint32_t reps) {
  const uint32_t L = uint32_t(m.layers.size());
  if (!device.info().timestamps)
    throw UserError(device.label() + " has no GPU timestamps; use --partition cost");
  Stage stage(device, m, layout_stage(m, 0, 0, L, true, rows, 1, Remat::Never));
  for (const model::ParamSpec& p : m.params()) {
    const std::vector<float> v = p.kind == model::ParamKind::State
                                     ? std::vector<float>(p.elements(), 0.0f)
                                     : model::initial_values(p, 0);
    vk::upload(stage.param(p.name), v.data(), v.size() * 4);
  }
  // Zero inputs and class-0 targets: valid data, and the timing does not depend on values.
  const std::vector<uint8_t> zeros(std::max(stage.input(0).size(), stage.targets(0).size()), 0);
  vk::upload(stage.input(0), zeros.data(), stage.input(0).size());
  vk::upload(stage.targets(0), zeros.data(), stage.targets(0).size());

  std::vector<std::vector<double>> samples(L);
  for (uint32_t r = 0; r <= reps; ++r) {
    std::vector<uint32_t> fwd, bwd;
    stage.set_marks(&fwd, &bwd);
    vk::Commands cmd(device, "profile");
    const MicroBatch mb{0, rows, rows, 0, true};
    stage.zero_loss(cmd);
    stage.forward(cmd, mb, std::nullopt, false);
    stage.backward(cmd, mb, std::nullopt);
    cmd.run();
    stage.set_marks(nullptr, nullptr);
    if (r == 0) continue;  // warm-up: pipelines compiled, caches filled
    const std::vector<double> ts = cmd.timestamps_ns();
    BRIGADE_EXPECT(fwd.size() == L + 1 && bwd.size() == L + 1, "a mark before and after each layer");
    for (uint32_t l = 0; l < L; ++l) {
      const uint32_t b = L - 1 - l;  // backward marks run from the last layer
      samples[l].push_back((ts[fwd[l + 1]] - ts[fwd[l]] + ts[bwd[b + 1]] - ts[bwd[b]]) * 1e-9);
    }
  }
  std::vector<double> out;
  for (auto& s : samples) {
    std::sort(s.begin(), s.end());
    out.push_back(s[s.size() / 2]);
  }
  return out;
}

}  // namespace brigade::pipeline
