#include "pipeline/profile.h"

#include <algorithm>

#include "ops/matmul_split.h"
#include "pipeline/plan.h"
#include "pipeline/cell.h"
#include "util/stats.h"
#include "util/error.h"

namespace brigade::pipeline {

std::vector<double> LayerProfile::total() const {
  std::vector<double> out(forward.size());
  for (size_t l = 0; l < out.size(); ++l) out[l] = forward[l] + backward[l];
  return out;
}

LayerProfile profile_model(vk::Device& device, const model::Model& m, uint32_t rows, uint32_t reps,
                           bool per_kernel, ops::Precision precision, bool training) {
  const uint32_t L = uint32_t(m.layers.size());
  if (!device.info().timestamps)
    throw UserError(device.label() + " has no GPU timestamps; use `partition` cost");
  // The whole model goes on the device for the measurement: a cap meant for one pipeline
  // cell does not apply, and the peaks it leaves are not a stage's.
  struct LiftCap {
    vk::Allocator& mem;
    uint64_t cap = mem.cap();
    LiftCap(vk::Allocator& a) : mem(a) { mem.set_cap(0); }
    ~LiftCap() {
      mem.set_cap(cap);
      mem.reset_peaks();
    }
  } lift{device.memory()};
  const CellLayout layout = layout_cell(m, 0, 0, L, true, rows, CellBuffers{.training = training},
                                        std::vector<ops::Precision>(L, precision), device_facts(m, device.info()));
  Cell stage(device, m, layout);
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
  {
    vk::Commands cmd(device, "weight copies");
    stage.refresh_weight_copies(cmd);
    cmd.run();
  }

  std::vector<std::vector<double>> fwd_s(L), bwd_s(L), kernel_s;
  std::vector<KernelTime> kernels;
  for (uint32_t r = 0; r <= reps; ++r) {
    std::vector<uint32_t> fwd, bwd;
    std::vector<vk::Commands::KernelMark> marks;
    stage.set_marks(&fwd, &bwd);
    vk::Commands cmd(device, "profile");
    const MicroBatch mb{.rows = rows, .total_rows = rows, .training = training};
    stage.zero_loss(cmd);
    if (per_kernel) cmd.set_kernel_marks(&marks);
    stage.forward(cmd, mb, std::nullopt, false);
    if (training) stage.backward(cmd, mb, std::nullopt);
    cmd.set_kernel_marks(nullptr);
    cmd.run();
    stage.set_marks(nullptr, nullptr);
    if (r == 0) continue;  // warm-up: pipelines compiled, caches filled
    const std::vector<double> ts = cmd.timestamps_ns();
    BRIGADE_EXPECT(fwd.size() == L + 1 && bwd.size() == (training ? L + 1 : 0), "a mark before and after each layer");
    if (!training) bwd.assign(L + 1, uint32_t(ts.size()));  // no backward: nothing lies in one
    for (uint32_t l = 0; l < L; ++l) {
      const uint32_t b = L - 1 - l;  // backward marks run from the last layer
      fwd_s[l].push_back((ts[fwd[l + 1]] - ts[fwd[l]]) * 1e-9);
      bwd_s[l].push_back(training ? (ts[bwd[b + 1]] - ts[bwd[b]]) * 1e-9 : 0.0);
    }
    if (r == 1) {  // which layer and pass each dispatch belongs to: the marks around it
      kernel_s.resize(marks.size());
      for (const auto& k : marks) {
        KernelTime t{L, k.timestamp > bwd.front(), k.kernel->name(), 0, k.work, k.flops};
        if (k.timestamp > fwd.back() && k.timestamp < bwd.front()) {  // the loss: layer L, its own pass
          t.loss = true;
          kernels.push_back(t);
          continue;
        }
        const std::vector<uint32_t>& pass = t.backward ? bwd : fwd;
        const uint32_t i = uint32_t(std::lower_bound(pass.begin(), pass.end(), k.timestamp) - pass.begin());
        BRIGADE_EXPECT(i >= 1 && i <= L, "every dispatch lies between two layer marks");
        t.layer = t.backward ? L - i : i - 1;
        kernels.push_back(t);
      }
    }
    BRIGADE_EXPECT(marks.size() == kernel_s.size(), "the same dispatches on every run");
    for (size_t i = 0; i < marks.size(); ++i)
      kernel_s[i].push_back((ts[marks[i].timestamp] - ts[marks[i].timestamp - 1]) * 1e-9);
  }
  LayerProfile out;
  for (uint32_t l = 0; l < L; ++l) {
    out.forward.push_back(median(fwd_s[l]));
    out.backward.push_back(median(bwd_s[l]));
  }
  for (size_t i = 0; i < kernels.size(); ++i) kernels[i].seconds = median(kernel_s[i]);
  out.kernels = std::move(kernels);
  return out;
}

LayerProfile profile_layer_times(vk::Device& device, const model::Model& m, uint32_t rows, uint32_t reps,
                                 ops::Precision precision, bool training) {
  const std::optional<model::StandIn> s = model::stand_in(m);
  if (!s) return profile_model(device, m, rows, reps, false, precision, training);
  const LayerProfile short_profile = profile_model(device, s->model, rows, reps, false, precision, training);
  LayerProfile out;
  for (uint32_t l : s->layer) {
    out.forward.push_back(short_profile.forward.at(l));
    out.backward.push_back(short_profile.backward.at(l));
  }
  return out;
}

}  // namespace brigade::pipeline
