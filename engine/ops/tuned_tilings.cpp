#include "ops/tuned_tilings.h"

#include <atomic>
#include <memory>
#include <mutex>

#include "ops/matmul_candidates.h"

namespace brigade::ops {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<const TunedTilings>> by_device;  // by device_id()
  std::atomic<bool> any{false};
};

Registry& registry() {
  static Registry r;
  return r;
}

std::string device_id(const vk::PhysicalInfo& device) {
  return device.device_uuid_string() + " " + device.driver_version_string();
}

std::shared_ptr<const TunedTilings> find(const vk::PhysicalInfo& device) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const auto it = r.by_device.find(device_id(device));
  return it == r.by_device.end() ? nullptr : it->second;
}

}  // namespace

std::string default_tiling_cache() { return io::cache_path("tilings.json"); }

std::string tuned_device_key(const vk::PhysicalInfo& device) { return device_id(device) + " " + io::build_checksum(); }

TunedTilings tuned_tilings(const io::CacheFile& file, const vk::PhysicalInfo& device) {
  TunedTilings out;
  const nlohmann::json* entry = file.find(tuned_device_key(device));
  if (!entry || !entry->is_object()) return out;
  for (const auto& [key, product] : entry->items())
    if (product.is_object() && product.contains("tiling") && product["tiling"].is_string())
      out[key] = product["tiling"].get<std::string>();
  return out;
}

void use_tuned_tilings(const vk::PhysicalInfo& device, TunedTilings tilings) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (tilings.empty()) r.by_device.erase(device_id(device));
  else r.by_device[device_id(device)] = std::make_shared<const TunedTilings>(std::move(tilings));
  r.any = !r.by_device.empty();
}

void clear_tuned_tilings() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.by_device.clear();
  r.any = false;
}

bool any_tuned() { return registry().any; }

std::optional<MatmulTiling> tuned_tiling(const vk::PhysicalInfo& device, const CapturedProduct& c,
                                         const MatmulTiling& by_default, uint64_t workspace) {
  const std::shared_ptr<const TunedTilings> tuned = find(device);
  if (!tuned) return std::nullopt;
  const auto it = tuned->find(product_key(c));
  if (it == tuned->end()) return std::nullopt;
  for (const MatmulTiling& t : product_candidates(device, c, by_default, workspace))
    if (t.name() == it->second) return t;
  return std::nullopt;
}

size_t tuned_count(const vk::PhysicalInfo& device) {
  const std::shared_ptr<const TunedTilings> tuned = find(device);
  return tuned ? tuned->size() : 0;
}

std::string tuned_checksum(const vk::PhysicalInfo& device) {
  const std::shared_ptr<const TunedTilings> tuned = find(device);
  if (!tuned) return "";
  std::string all;
  for (const auto& [key, name] : *tuned) all += key + '\n' + name + '\n';
  return io::checksum(all);
}

}  // namespace brigade::ops
