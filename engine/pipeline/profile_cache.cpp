#include "pipeline/profile_cache.h"

#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <vector>

namespace brigade::pipeline {

namespace {

// A CRC-32 as eight hex digits.
std::string crc_text(uLong crc) {
  char text[16];
  std::snprintf(text, sizeof text, "%08lx", static_cast<unsigned long>(crc));
  return text;
}

}  // namespace

const std::string& build_checksum() {
  // Streamed in 1 MiB pieces: the whole program in one buffer (io::read_file) took 18 MB
  // more and 150 ms more, the time to fault that fresh buffer's pages in.
  static const std::string sum = [] {
    std::ifstream in("/proc/self/exe", std::ios::binary);
    std::vector<char> piece(1 << 20);
    uLong crc = crc32(0L, Z_NULL, 0);
    bool read = false;
    while (in.read(piece.data(), std::streamsize(piece.size())) || in.gcount() > 0) {
      crc = crc32(crc, reinterpret_cast<const Bytef*>(piece.data()), uInt(in.gcount()));
      read = true;
    }
    return read ? crc_text(crc) : std::string("unknown");
  }();
  return sum;
}

std::string profile_key(const vk::PhysicalInfo& device, const model::Model& m, uint32_t rows, ops::Precision p) {
  const uLong model = crc32(0L, reinterpret_cast<const Bytef*>(m.config.data()), uInt(m.config.size()));
  return device.device_uuid_string() + " " + device.driver_version_string() + " " + crc_text(model) + "x" +
         std::to_string(m.layers.size()) + " " + std::to_string(rows) + " " + ops::precision_name(p) + " " +
         build_checksum();
}

std::string default_profile_cache() {
  std::string dir;
  if (const char* d = std::getenv("BRIGADE_CACHE_DIR"); d && *d) dir = d;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = std::string(x) + "/brigade";
  else if (const char* h = std::getenv("HOME"); h && *h) dir = std::string(h) + "/.cache/brigade";
  return dir.empty() ? "" : dir + "/profiles.json";
}

ProfileCache::ProfileCache(std::string path) : path_(std::move(path)) {
  if (path_.empty() || !std::filesystem::exists(path_)) return;
  std::ifstream in(path_);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_object() && j.value("version", 0) == 1 && j.contains("profiles") && j["profiles"].is_object())
    entries_ = j["profiles"];
  else
    warning_ = path_ + " is not a profile cache Brigade wrote; ignored, and rewritten with new profiles";
}

std::optional<LayerTimes> ProfileCache::find(const std::string& key, size_t layers) const {
  const auto it = entries_.find(key);
  if (it == entries_.end() || !it->is_object()) return std::nullopt;
  LayerTimes t;
  for (const char* pass : {"forward", "backward"}) {
    const auto v = it->find(pass);
    if (v == it->end() || !v->is_array() || v->size() != layers) return std::nullopt;
    std::vector<double>& out = pass[0] == 'f' ? t.forward : t.backward;
    for (const nlohmann::json& x : *v) {
      if (!x.is_number() || !std::isfinite(x.get<double>()) || x.get<double>() < 0) return std::nullopt;
      out.push_back(x.get<double>());
    }
  }
  return t;
}

void ProfileCache::put(const std::string& key, const LayerTimes& t) {
  entries_[key] = {{"forward", t.forward}, {"backward", t.backward}};
}

std::string ProfileCache::save() const {
  if (path_.empty()) return {};
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(fs::path(path_).parent_path(), ec);
  const std::string tmp = path_ + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    out << nlohmann::json{{"version", 1}, {"profiles", entries_}}.dump(1) << "\n";
    if (!out.flush()) {
      const std::string why = std::strerror(errno);
      fs::remove(tmp, ec);
      return "could not write " + tmp + " (" + why + ")";
    }
  }
  fs::rename(tmp, path_, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return "could not replace " + path_;
  }
  return {};
}

}  // namespace brigade::pipeline
