// Measured layer times kept between runs, so that a second `--plan auto` does not profile
// again. One JSON file; an entry is found only by the same device (its UUID), driver
// version, model (its configuration's checksum and layer count), micro-batch rows,
// precision and program (build_checksum), so a profile from another driver, device, model
// or build of Brigade (other kernels, other tilings) is never used. A file that
// does not parse is ignored with one warning and rewritten whole; an entry of the wrong
// length or with a time that is not a finite non-negative number counts as missing. The
// cache holds times only: memory always comes from the plan's model, never from the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "model/model.h"
#include "ops/precision.h"
#include "pipeline/planner.h"
#include "vk/physical.h"

namespace brigade::pipeline {

// "<device uuid> <driver version> <model checksum>x<layers> <rows> <precision> <build checksum>".
std::string profile_key(const vk::PhysicalInfo& device, const model::Model& m, uint32_t rows, ops::Precision p);

// The running program's checksum (CRC-32 of /proc/self/exe, read once; "unknown" where it
// cannot be read): a rebuilt or upgraded Brigade profiles again.
const std::string& build_checksum();

// $BRIGADE_CACHE_DIR, else $XDG_CACHE_HOME/brigade, else $HOME/.cache/brigade; then
// profiles.json. Empty when none of them is set.
std::string default_profile_cache();

class ProfileCache {
 public:
  // Reads `path` when it exists. Empty path: a cache that keeps nothing.
  explicit ProfileCache(std::string path);
  std::optional<LayerTimes> find(const std::string& key, size_t layers) const;
  void put(const std::string& key, const LayerTimes& t);
  // Writes the file through a temporary and a rename (a reader sees the old file or the
  // new); returns "" or why it could not.
  std::string save() const;
  const std::string& path() const { return path_; }
  // Why the file was ignored when read ("" when it was not).
  const std::string& warning() const { return warning_; }

 private:
  std::string path_, warning_;
  nlohmann::json entries_ = nlohmann::json::object();
};

}  // namespace brigade::pipeline
