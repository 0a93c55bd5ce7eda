// Tuned tilings: for a device's products, the tilings `brigade bench products --save` measured
// faster than the built-in default (ops::default_tiling), which ops::matmul then takes in its
// place. They are kept in the cache folder's tilings.json (io/cache_file.h), under the device's
// UUID, its driver's version and the program's checksum, each found by its product's key
// (product_key: shape, formats, epilogue, strides, operands' alignment), so a product that
// differs in anything its kernel depends on keeps its default. A tuned tiling is taken only
// while it is still one of the product's candidates on that device (ops/matmul_candidates.h):
// a name the device or the build no longer has, or a split K with no workspace, is passed over.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "io/cache_file.h"
#include "ops/matmul.h"
#include "ops/product_capture.h"
#include "vk/physical.h"

namespace brigade::ops {

// One device's tuned products: product_key -> the tiling's name (MatmulTiling::name()).
using TunedTilings = std::map<std::string, std::string>;

// io::cache_path("tilings.json").
std::string default_tiling_cache();
// The file's key for a device's entry: "<device uuid> <driver version> <build checksum>".
std::string tuned_device_key(const vk::PhysicalInfo& device);
// The device's entry in `file` (no entry, or one Brigade did not write: none).
TunedTilings tuned_tilings(const io::CacheFile& file, const vk::PhysicalInfo& device);

// Every later ops::matmul on this thread or any other, on this device (its UUID and driver
// version), takes these in place of the defaults they beat (replacing those given before;
// empty: none). Given before the recordings start.
void use_tuned_tilings(const vk::PhysicalInfo& device, TunedTilings tilings);
// None on any device, as a program starts.
void clear_tuned_tilings();

// The tuned tiling of `c` in place of `by_default` on `device`, where it has one that is still
// among the product's candidates within `workspace` bytes.
std::optional<MatmulTiling> tuned_tiling(const vk::PhysicalInfo& device, const CapturedProduct& c,
                                         const MatmulTiling& by_default, uint64_t workspace);
// Whether any device has tuned tilings (ops::matmul looks no further where none has).
bool any_tuned();
// The number of the device's tuned products, and a checksum of them ("" where it has none:
// what the planner's profile keys add, pipeline/profile_cache.h).
size_t tuned_count(const vk::PhysicalInfo& device);
std::string tuned_checksum(const vk::PhysicalInfo& device);

}  // namespace brigade::ops
