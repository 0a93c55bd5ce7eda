// Shapes, parameter specs and the model's parameter list (engine/model/model.h).
#include <set>

#include "model/model.h"

namespace brigade::model {

uint64_t elements(const Shape& s) {
  uint64_t n = 1;
  for (uint32_t d : s) n *= d;
  return n;
}

std::string to_string(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

uint64_t ParamSpec::elements() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= uint64_t(d);
  return n;
}

std::vector<ParamSpec> Model::params() const {
  std::vector<ParamSpec> out;
  std::set<std::string> seen;
  for (const auto& layer : layers)
    for (ParamSpec& p : layer->params())
      if (seen.insert(p.name).second) out.push_back(std::move(p));
  return out;
}

std::vector<bool> Model::stores_half(const vk::PhysicalInfo& device) const {
  std::vector<bool> out;
  for (const auto& layer : layers) out.push_back(layer->stores_half(device));
  return out;
}

std::vector<uint8_t> Model::lean_scratch(const vk::PhysicalInfo& device) const {
  std::vector<uint8_t> out;
  for (const auto& layer : layers) out.push_back(layer->lean_scratch(device));
  return out;
}

uint64_t Model::parameter_count() const {
  uint64_t n = 0;
  for (const ParamSpec& p : params())
    if (p.kind == ParamKind::Trainable) n += p.elements();
  return n;
}

}  // namespace brigade::model
