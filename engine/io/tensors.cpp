#include "io/tensors.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace brigade::io {

namespace {

bool saved(const model::ParamSpec& p) { return p.kind != model::ParamKind::State; }

std::vector<int64_t> with_rows(int64_t rows, const model::Shape& s) {
  std::vector<int64_t> out{rows};
  for (uint32_t d : s) out.push_back(d);
  return out;
}

}  // namespace

void refuse_non_finite(const std::vector<float>& values, const std::string& what) {
  const size_t bad = size_t(std::count_if(values.begin(), values.end(), [](float v) { return !std::isfinite(v); }));
  if (bad)
    throw UserError(what + " holds " + std::to_string(bad) + " of its " + std::to_string(values.size()) +
                    " values not finite (NaN or infinite)");
}

std::map<std::string, std::vector<float>> read_parameters(const SafeTensors& file,
                                                          const model::Model& m) {
  std::map<std::string, std::vector<float>> out;
  for (const model::ParamSpec& p : m.params()) {
    if (!saved(p)) continue;
    if (!file.has(p.name))
      throw UserError(file.source() + ": parameter '" + p.name + "' of " + m.name +
                      " is missing (expected F32 " + shape_string(p.shape) + ")");
    out[p.name] = file.f32(p.name, p.shape);
    refuse_non_finite(out[p.name], file.source() + ": parameter '" + p.name + "'");
  }
  // What a checkpoint holds besides the parameters is not refused.
  auto checkpoint_extra = [](const std::string& name) {
    const std::string tracked = ".num_batches_tracked";
    return name.rfind("optimizer.", 0) == 0 ||
           (name.size() > tracked.size() && name.compare(name.size() - tracked.size(), tracked.size(), tracked) == 0);
  };
  for (const std::string& name : file.names())
    if (!out.count(name) && !checkpoint_extra(name))
      throw UserError(file.source() + ": tensor '" + name + "' is not a parameter of " + m.name);
  return out;
}

SafeTensorsWriter initial_parameters(const model::Model& m, uint64_t seed) {
  SafeTensorsWriter w;
  for (const model::ParamSpec& p : m.params())
    if (saved(p)) w.add(p.name, p.shape, model::initial_values(p, seed));
  w.set_metadata("model", m.name);
  w.set_metadata("seed", std::to_string(seed));
  w.set_metadata("config", m.config);
  return w;
}

model::Model model_for_batch(model::Model m, const SafeTensors& file) {
  if (!m.block_size || !file.has("input")) return m;
  const TensorInfo& in = file.info("input");
  if (in.shape.size() != 2 || in.shape[1] == int64_t(m.input.at(0))) return m;
  if (in.shape[1] < 1 || in.shape[1] > int64_t(m.block_size))
    throw UserError(file.source() + ": 'input' has shape " + shape_string(in.shape) + "; " + m.name +
                    " takes token windows [N, T] with T from 1 to its block_size " +
                    std::to_string(m.block_size));
  return model::with_window(m, uint32_t(in.shape[1]));
}

pipeline::Batch read_batch(const SafeTensors& file, const model::Model& m) {
  for (const char* name : {"input", "target"})
    if (!file.has(name))
      throw UserError(file.source() + ": a batch needs tensors 'input' and 'target'; '" +
                      std::string(name) + "' is missing");
  const TensorInfo& in = file.info("input");
  if (in.shape.empty() || in.shape[0] < 1 || in.shape[0] > int64_t(UINT32_MAX))
    throw UserError(file.source() + ": 'input' has shape " + shape_string(in.shape) +
                    "; expected [N, " + model::to_string(m.input).substr(1));
  pipeline::Batch b;
  b.rows = uint32_t(in.shape[0]);
  const std::vector<int64_t> input_shape = with_rows(b.rows, m.input);
  if (m.token_input) {
    if (in.shape != input_shape)
      throw UserError(file.source() + ": 'input' has shape " + shape_string(in.shape) +
                      "; expected token ids " + shape_string(input_shape));
    b.tokens = file.i32("input", 0, m.classes);
  } else {
    b.images = file.f32("input", input_shape);
    refuse_non_finite(b.images, file.source() + ": tensor 'input'");
  }
  // A token model's targets are [N, T] like its input, a window of one token too.
  const std::vector<int64_t> target_shape =
      m.targets_per_sample == 1 && !m.token_input ? std::vector<int64_t>{b.rows}
                                                  : std::vector<int64_t>{b.rows, int64_t(m.targets_per_sample)};
  if (file.info("target").shape != target_shape)
    throw UserError(file.source() + ": 'target' has shape " + shape_string(file.info("target").shape) +
                    "; expected " + shape_string(target_shape));
  b.targets = file.i32("target", 0, m.classes);
  return b;
}

}  // namespace brigade::io
