#include "pipeline/profile_cache.h"

#include <cmath>

#include "ops/tuned_tilings.h"

namespace brigade::pipeline {

std::string profile_key(const vk::PhysicalInfo& device, const model::Model& m, uint32_t rows, ops::Precision p) {
  const std::string tuned = ops::tuned_checksum(device);
  return device.device_uuid_string() + " " + device.driver_version_string() + " " + io::checksum(m.config) + "x" +
         std::to_string(m.layers.size()) + " " + std::to_string(rows) + " " + ops::precision_name(p) + " " +
         io::build_checksum() + (tuned.empty() ? "" : " tuned " + tuned);
}

std::string default_profile_cache() { return io::cache_path("profiles.json"); }

std::optional<LayerTimes> ProfileCache::find(const std::string& key, size_t layers) const {
  const nlohmann::json* e = file_.find(key);
  if (!e || !e->is_object()) return std::nullopt;
  LayerTimes t;
  for (const char* pass : {"forward", "backward"}) {
    const auto v = e->find(pass);
    if (v == e->end() || !v->is_array() || v->size() != layers) return std::nullopt;
    std::vector<double>& out = pass[0] == 'f' ? t.forward : t.backward;
    for (const nlohmann::json& x : *v) {
      if (!x.is_number() || !std::isfinite(x.get<double>()) || x.get<double>() < 0) return std::nullopt;
      out.push_back(x.get<double>());
    }
  }
  return t;
}

void ProfileCache::put(const std::string& key, const LayerTimes& t) {
  file_.put(key, {{"forward", t.forward}, {"backward", t.backward}});
}

}  // namespace brigade::pipeline
