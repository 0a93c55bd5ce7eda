#include "io/checkpoint.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <stdexcept>

#include "io/tensors.h"
#include "util/error.h"

namespace brigade::io {

namespace {

constexpr const char* kFormat = "brigade-checkpoint 1";
const std::string kRunning = "running_mean";

// BatchNorm layers, by the prefix of their running_mean buffer.
std::vector<std::string> batchnorm_prefixes(const model::Model& m) {
  std::vector<std::string> out;
  for (const model::ParamSpec& p : m.params())
    if (p.kind == model::ParamKind::Buffer && p.name.size() >= kRunning.size() &&
        p.name.compare(p.name.size() - kRunning.size(), kRunning.size(), kRunning) == 0)
      out.push_back(p.name.substr(0, p.name.size() - kRunning.size()));
  return out;
}

uint64_t metadata_number(const SafeTensors& f, const std::string& key) {
  auto it = f.metadata().find(key);
  if (it == f.metadata().end()) throw UserError(f.source() + ": metadata '" + key + "' is missing");
  const std::string& text = it->second;
  // Digits only: stoull alone takes "-1" (as 2^64 - 1), "+3" and " 3".
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) try {
      return std::stoull(text);
    } catch (const std::out_of_range&) {
    }
  throw UserError(f.source() + ": metadata '" + key + "' is '" + it->second + "', not a whole number");
}

SafeTensors open_checkpoint(const std::string& path, const std::vector<uint8_t>* bytes) {
  SafeTensors f = bytes ? SafeTensors::parse(*bytes, path) : SafeTensors::load(path);
  auto it = f.metadata().find("format");
  if (it == f.metadata().end() || it->second != kFormat)
    throw UserError(path + ": not a brigade checkpoint (metadata 'format' is not '" + kFormat + "')");
  return f;
}

}  // namespace

void write_checkpoint(const std::string& path, const model::Model& m, const Checkpoint& c) {
  SafeTensorsWriter w;
  for (const model::ParamSpec& p : m.params()) {
    if (p.kind == model::ParamKind::State) continue;
    auto it = c.params.find(p.name);
    BRIGADE_EXPECT(it != c.params.end(), "checkpoint lacks parameter " + p.name);
    w.add(p.name, p.shape, it->second);
  }
  const int64_t tracked = int64_t(c.step);
  for (const std::string& prefix : batchnorm_prefixes(m))
    w.add(prefix + "num_batches_tracked", DType::I64, {}, &tracked, sizeof tracked);
  for (const auto& [name, values] : c.optimizer)
    w.add(kOptimizerPrefix + name, {int64_t(values.size())}, values);
  w.set_metadata("format", kFormat);
  w.set_metadata("model", m.name);
  w.set_metadata("step", std::to_string(c.step));
  w.set_metadata("config", c.config);
  w.set_metadata("rng", nlohmann::json{{"seed", c.seed},
                                       {"data_order", "splitmix64 keyed by (seed, step), see engine/io/data.h"}}
                            .dump());
  w.set_metadata("loss_scale", nlohmann::json{{"scale", c.loss_scale.scale},
                                              {"good_steps", c.loss_scale.good_steps},
                                              {"skipped_steps", c.loss_scale.skipped_steps}}
                                   .dump());
  w.set_metadata(kChecksum, w.checksum());  // a file damaged after the write is refused
  w.write(path);
}

std::string checkpoint_config(const std::string& path, const std::vector<uint8_t>* bytes) {
  const SafeTensors f = open_checkpoint(path, bytes);
  auto it = f.metadata().find("config");
  if (it == f.metadata().end()) throw UserError(path + ": metadata 'config' is missing");
  return it->second;
}

uint64_t checkpoint_step(const std::string& path) { return metadata_number(open_checkpoint(path, nullptr), "step"); }

Checkpoint read_checkpoint(const std::string& path, const model::Model& m, const std::vector<uint8_t>* bytes) {
  const SafeTensors f = open_checkpoint(path, bytes);
  Checkpoint c;
  c.step = metadata_number(f, "step");
  c.config = f.metadata().at("config");
  try {
    c.seed = nlohmann::json::parse(f.metadata().at("rng")).at("seed").get<uint64_t>();
  } catch (const std::exception&) {
    throw UserError(path + ": metadata 'rng' is not {\"seed\": N, ...}");
  }
  if (auto it = f.metadata().find("loss_scale"); it != f.metadata().end()) {
    try {
      const nlohmann::json j = nlohmann::json::parse(it->second);
      if (!j.at("good_steps").is_number_unsigned() || !j.at("skipped_steps").is_number_unsigned())
        throw std::invalid_argument("counts");
      j.at("scale").get_to(c.loss_scale.scale);
      j.at("good_steps").get_to(c.loss_scale.good_steps);
      j.at("skipped_steps").get_to(c.loss_scale.skipped_steps);
    } catch (const std::exception&) {
      throw UserError(path + ": metadata 'loss_scale' is not {\"scale\": X, \"good_steps\": N, \"skipped_steps\": N}");
    }
    if (!(c.loss_scale.scale > 0) || !std::isfinite(c.loss_scale.scale))
      throw UserError(path + ": metadata 'loss_scale' has a scale that is not a positive number");
    // The updates made so far are the steps less the skipped ones; the scale grows at kInterval.
    if (c.loss_scale.skipped_steps > c.step)
      throw UserError(path + ": metadata 'loss_scale' counts " + std::to_string(c.loss_scale.skipped_steps) +
                      " skipped steps in a run of " + std::to_string(c.step));
    if (c.loss_scale.good_steps >= optim::LossScale::kInterval)
      throw UserError(path + ": metadata 'loss_scale' counts " + std::to_string(c.loss_scale.good_steps) +
                      " good steps since the scale last changed; it changes after " +
                      std::to_string(optim::LossScale::kInterval));
  }
  c.params = read_parameters(f, m);
  const std::string prefix = kOptimizerPrefix;
  for (const std::string& name : f.names())
    if (name.compare(0, prefix.size(), prefix) == 0) {
      std::vector<float>& state = c.optimizer[name.substr(prefix.size())] = f.f32(name);
      refuse_non_finite(state, path + ": optimizer state '" + name.substr(prefix.size()) + "'");
    }
  return c;
}

}  // namespace brigade::io
