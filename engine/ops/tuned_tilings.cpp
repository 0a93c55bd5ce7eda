#include "ops/tuned_tilings.h"

#include <atomic>
#include <bit>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "ops/matmul_candidates.h"

namespace brigade::ops {
namespace {

// A device's tuned tilings, and what each product it was asked for resolved to: a step records
// its products every time (vk::Commands compares them with the last recording to replay it),
// so the candidates are listed once for a product, not on every recording.
struct Tuned {
  TunedTilings names;
  std::mutex mutex;
  std::unordered_map<std::string, std::optional<MatmulTiling>> resolved;  // by fingerprint()
};

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<Tuned>> by_device;  // by device_id()
  std::atomic<bool> any{false};
};

Registry& registry() {
  static Registry r;
  return r;
}

std::string device_id(const vk::PhysicalInfo& device) {
  return device.device_uuid_string() + " " + device.driver_version_string();
}

// Every field of the product's params but its tiling, and its operands, as bytes: at least as
// fine as product_key, and built in a fraction of its time.
std::string fingerprint(const CapturedProduct& c, uint64_t workspace) {
  const MatmulParams& p = c.params;
  const uint32_t fields[] = {p.M, p.N, p.K, p.trans_a, p.trans_b, p.accumulate, std::bit_cast<uint32_t>(p.alpha),
                             p.batch, p.terms, p.bias_rows, p.lda, p.ldb, p.ldc, p.stride_a, p.stride_b, p.stride_c,
                             p.heads, p.head_stride_a, p.head_stride_b, p.head_stride_c, p.offset_a, p.offset_b,
                             p.offset_c, uint32_t(p.epilogue), uint32_t(p.causal), uint32_t(p.a_format),
                             uint32_t(p.b_format), uint32_t(p.c_format), uint32_t(p.c_round), uint32_t(p.e_format),
                             uint32_t(p.copy_format), p.k_chunk, p.tiling.has_value()};
  std::string out(reinterpret_cast<const char*>(fields), sizeof fields);
  for (const auto& o : {std::optional(c.a), std::optional(c.b), std::optional(c.c), c.bias, c.epilogue, c.copy}) {
    const uint64_t v[] = {o.has_value(), o ? o->offset : 0, o ? o->bytes : 0};
    out.append(reinterpret_cast<const char*>(v), sizeof v);
  }
  out.append(reinterpret_cast<const char*>(&workspace), sizeof workspace);
  return out;
}

std::shared_ptr<Tuned> find(const vk::PhysicalInfo& device) {
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
  else (r.by_device[device_id(device)] = std::make_shared<Tuned>())->names = std::move(tilings);
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
  const std::shared_ptr<Tuned> tuned = find(device);
  if (!tuned) return std::nullopt;
  const std::string asked = fingerprint(c, workspace);  // the candidates depend on the workspace too
  std::lock_guard lock(tuned->mutex);
  if (const auto seen = tuned->resolved.find(asked); seen != tuned->resolved.end()) return seen->second;
  std::optional<MatmulTiling>& out = tuned->resolved[asked];
  if (const auto it = tuned->names.find(product_key(c)); it != tuned->names.end())
    for (const MatmulTiling& t : product_candidates(device, c, by_default, workspace))
      if (t.name() == it->second) out = t;
  return out;
}

size_t tuned_count(const vk::PhysicalInfo& device) {
  const std::shared_ptr<Tuned> tuned = find(device);
  return tuned ? tuned->names.size() : 0;
}

std::string tuned_checksum(const vk::PhysicalInfo& device) {
  const std::shared_ptr<Tuned> tuned = find(device);
  if (!tuned) return "";
  std::string all;
  for (const auto& [key, name] : tuned->names) all += key + '\n' + name + '\n';
  return io::checksum(all);
}

}  // namespace brigade::ops
