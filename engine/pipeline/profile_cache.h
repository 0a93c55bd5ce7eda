// Measured layer times kept between runs, so that a second `--plan auto` does not profile
// again (io/cache_file.h: profiles.json). An entry is found only by the same device (its
// UUID), driver version, model (its configuration's checksum, layer count and a sample's
// shape: a GPT's window, which model::with_window changes without its configuration), micro-batch
// rows, precision, program (io::build_checksum), tuned tilings (ops::tuned_checksum) and the
// environment's kernel settings, so a profile from another driver, device, model or build of
// Brigade (other kernels, other tilings) is never used. An entry of the wrong length, with a time that is not a finite
// non-negative number, or whose times are all zero or sum past a double's range counts as
// missing (it is measured again). The cache holds times only: memory always comes
// from the plan's model, never from the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "io/cache_file.h"
#include "model/model.h"
#include "ops/precision.h"
#include "pipeline/planner.h"
#include "vk/physical.h"

namespace brigade::pipeline {

// "<device uuid> <driver version> <model checksum>x<layers> <sample shape> <rows> <precision> <build checksum>",
// then " tuned <checksum>" where the device takes tuned tilings, then " NAME=value" for each
// setting in the environment that chooses kernels (BRIGADE_ATTENTION, _ATTENTION_BLOCKS,
// _MATRIX_UNITS, _SPLIT_K) where set; then " forward" for a profile of forward passes alone
// (`training` false: eval's and sample's).
std::string profile_key(const vk::PhysicalInfo& device, const model::Model& m, uint32_t rows, ops::Precision p,
                        bool training = true);

// io::cache_path("profiles.json").
std::string default_profile_cache();

class ProfileCache {
 public:
  // Reads `path` when it exists. Empty path: a cache that keeps nothing.
  explicit ProfileCache(std::string path) : file_(std::move(path), "profile", "profiles") {}
  std::optional<LayerTimes> find(const std::string& key, size_t layers) const;
  void put(const std::string& key, const LayerTimes& t);
  std::string save() { return file_.save(); }  // io::CacheFile::save
  const std::string& path() const { return file_.path(); }
  // Why the file was ignored when read ("" when it was not).
  const std::string& warning() const { return file_.warning(); }

 private:
  io::CacheFile file_;
};

}  // namespace brigade::pipeline
