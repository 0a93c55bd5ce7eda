// What Brigade measures on a machine and keeps between runs (the planner's layer times,
// pipeline/profile_cache.h; the tilings `bench products --save` found faster, ops/tuned_tilings.h):
// one JSON file per kind in the cache folder, its entries under one section, each found by a
// key that names everything the measurement depends on. A file that does not parse, that
// nests deeper than a cache Brigade writes, or that another kind of cache wrote, is ignored
// with one warning and rewritten whole.
#pragma once

#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "io/checksum.h"

namespace brigade::io {

// $BRIGADE_CACHE_DIR, else $XDG_CACHE_HOME/brigade, else $HOME/.cache/brigade; then `name`.
// Empty when none of them is set.
std::string cache_path(const std::string& name);

// The running program's checksum (CRC-32 of /proc/self/exe, read once; "unknown" where it
// cannot be read): every key carries it, so a rebuilt or upgraded Brigade measures again.
const std::string& build_checksum();

class CacheFile {
 public:
  // Reads `path` when it exists, keeping the object under `section` ("profiles"); `kind`
  // names the cache in the warning ("profile"). Empty path: a cache that keeps nothing.
  CacheFile(std::string path, std::string kind, std::string section);
  // The entry under `key`, or null.
  const nlohmann::json* find(const std::string& key) const;
  void put(const std::string& key, nlohmann::json entry);
  void erase(const std::string& key);
  // Writes the file through a temporary and a rename (a reader sees the old file or the
  // new; a symbolic link is written through, and kept), this object's puts and erases laid
  // over what the file holds then (entries other processes saved since it was read are
  // kept), under a lock beside the file (FILE.lock); then holds the file as written.
  // Returns "" or why it could not.
  std::string save();
  const std::string& path() const { return path_; }
  // Why the file was ignored when read ("" when it was not).
  const std::string& warning() const { return warning_; }

 private:
  // The file's section into `entries`; "" or why it was ignored.
  std::string read(nlohmann::json& entries) const;
  std::string path_, kind_, section_, warning_;
  nlohmann::json entries_ = nlohmann::json::object();
  std::set<std::string> changed_;  // keys put or erased since the file was read
};

}  // namespace brigade::io
