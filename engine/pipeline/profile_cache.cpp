#include "pipeline/profile_cache.h"

#include <cmath>
#include <cstdlib>

#include "ops/tuned_tilings.h"

namespace brigade::pipeline {

namespace {

// The settings read from the environment that choose kernels, forms or tilings: a profile
// measured under others timed other kernels.
constexpr const char* kKernelSettings[] = {"BRIGADE_ATTENTION", "BRIGADE_ATTENTION_BLOCKS", "BRIGADE_MATRIX_UNITS",
                                           "BRIGADE_SPLIT_K"};

}  // namespace

// The sample's shape is in the key: a GPT's window (model::with_window) keeps its config.
std::string profile_key(const vk::PhysicalInfo& device, const model::Model& m, uint32_t rows, ops::Precision p,
                        bool training) {
  const std::string tuned = ops::tuned_checksum(device);
  std::string key = device.device_uuid_string() + " " + device.driver_version_string() + " " + io::checksum(m.config) +
                    "x" + std::to_string(m.layers.size()) + " " + model::to_string(m.input) + " " + std::to_string(rows) + " " + ops::precision_name(p) +
                    " " + io::build_checksum() + (tuned.empty() ? "" : " tuned " + tuned);
  for (const char* name : kKernelSettings)
    if (const char* v = std::getenv(name); v && *v) key += std::string(" ") + name + "=" + v;
  return training ? key : key + " forward";
}

std::string default_profile_cache() { return io::cache_path("profiles.json"); }

std::optional<LayerTimes> ProfileCache::find(const std::string& key, size_t layers) const {
  const nlohmann::json* e = file_.find(key);
  if (!e || !e->is_object()) return std::nullopt;
  LayerTimes t;
  double sum = 0;
  for (const char* pass : {"forward", "backward"}) {
    const auto v = e->find(pass);
    if (v == e->end() || !v->is_array() || v->size() != layers) return std::nullopt;
    std::vector<double>& out = pass[0] == 'f' ? t.forward : t.backward;
    for (const nlohmann::json& x : *v) {
      if (!x.is_number() || !std::isfinite(x.get<double>()) || x.get<double>() < 0) return std::nullopt;
      out.push_back(x.get<double>());
      sum += out.back();
    }
  }
  // No time at all, or times whose sum overflows: no profile measured them.
  if (!(sum > 0) || !std::isfinite(sum)) return std::nullopt;
  return t;
}

void ProfileCache::put(const std::string& key, const LayerTimes& t) {
  file_.put(key, {{"forward", t.forward}, {"backward", t.backward}});
}

}  // namespace brigade::pipeline
