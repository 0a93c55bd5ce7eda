#include "io/cache_file.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <vector>

namespace brigade::io {
namespace {

std::string hex(uLong crc) {
  char text[16];
  std::snprintf(text, sizeof text, "%08lx", static_cast<unsigned long>(crc));
  return text;
}

}  // namespace

std::string checksum(std::string_view bytes) {
  return hex(crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), uInt(bytes.size())));
}

std::string cache_path(const std::string& name) {
  std::string dir;
  if (const char* d = std::getenv("BRIGADE_CACHE_DIR"); d && *d) dir = d;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = std::string(x) + "/brigade";
  else if (const char* h = std::getenv("HOME"); h && *h) dir = std::string(h) + "/.cache/brigade";
  return dir.empty() ? "" : dir + "/" + name;
}

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
    return read ? hex(crc) : std::string("unknown");
  }();
  return sum;
}

CacheFile::CacheFile(std::string path, std::string kind, std::string section)
    : path_(std::move(path)), kind_(std::move(kind)), section_(std::move(section)) {
  if (path_.empty() || !std::filesystem::exists(path_)) return;
  std::ifstream in(path_);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  const bool ours = j.is_object() && j.contains("version") && j["version"].is_number_integer() && j["version"] == 1;
  if (ours && j.contains(section_) && j[section_].is_object())
    entries_ = j[section_];
  else
    warning_ = path_ + " is not a " + kind_ + " cache Brigade wrote; ignored, and rewritten with new " + section_;
}

const nlohmann::json* CacheFile::find(const std::string& key) const {
  const auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &*it;
}

void CacheFile::put(const std::string& key, nlohmann::json entry) { entries_[key] = std::move(entry); }

std::string CacheFile::save() const {
  if (path_.empty()) return {};
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(fs::path(path_).parent_path(), ec);
  const std::string tmp = path_ + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    out << nlohmann::json{{"version", 1}, {section_, entries_}}.dump(1) << "\n";
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

}  // namespace brigade::io
