#include "io/cache_file.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <unistd.h>
#include <vector>

#include "io/files.h"
#include "util/error.h"

namespace brigade::io {

namespace {

constexpr int kMaxDepth = 32;  // Brigade's caches nest a few levels deep

}  // namespace

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
    std::string crc;
    while (in.read(piece.data(), std::streamsize(piece.size())) || in.gcount() > 0)
      crc = checksum(std::string_view(piece.data(), size_t(in.gcount())), crc);
    return crc.empty() ? std::string("unknown") : crc;
  }();
  return sum;
}

CacheFile::CacheFile(std::string path, std::string kind, std::string section)
    : path_(std::move(path)), kind_(std::move(kind)), section_(std::move(section)) {
  warning_ = read(entries_);
}

std::string CacheFile::read(nlohmann::json& entries) const {
  if (path_.empty() || !std::filesystem::exists(path_)) return "";
  if (const std::string what = not_regular(path_, true); !what.empty())  // a folder, a pipe, ...
    return path_ + " " + what + ", not a " + kind_ + " cache; ignored";
  std::ifstream in(path_);
  // Nesting deeper than any cache Brigade writes is left unbuilt and the file refused: a
  // value nested some 100000 deep takes the stack with it when copied or compared.
  bool deep = false;
  const nlohmann::json::parser_callback_t depth = [&](int d, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (d > kMaxDepth) deep = true;
    return d <= kMaxDepth;
  };
  nlohmann::json j = nlohmann::json::parse(in, depth, false);
  if (deep) j = nlohmann::json::value_t::discarded;
  const bool ours = j.is_object() && j.contains("version") && j["version"].is_number_integer() && j["version"] == 1;
  if (!ours || !j.contains(section_) || !j[section_].is_object())
    return path_ + " is not a " + kind_ + " cache Brigade wrote; ignored, and rewritten with new " + section_;
  entries = std::move(j[section_]);
  return "";
}

const nlohmann::json* CacheFile::find(const std::string& key) const {
  const auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &*it;
}

void CacheFile::put(const std::string& key, nlohmann::json entry) {
  entries_[key] = std::move(entry);
  changed_.insert(key);
}

void CacheFile::erase(const std::string& key) {
  entries_.erase(key);
  changed_.insert(key);
}

std::string CacheFile::save() {
  if (path_.empty()) return {};
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(fs::path(path_).parent_path(), ec);
  // A link is written through (the file it names replaced, the link kept); what is not a
  // regular file stays as it is.
  const std::string file = fs::is_symlink(path_, ec) ? fs::weakly_canonical(path_, ec).string() : path_;
  if (const std::string what = not_regular(file, false); !what.empty())
    return file + " " + what + ", not a regular file; not written over";
  // Other processes' entries saved since this one read the file are kept: under the cache
  // folder's lock, the file is read again and this one's changes laid over it. A folder this
  // process cannot write is left to the write below to name.
  std::unique_ptr<FolderLock> lock;
  const std::string folder = fs::path(file).parent_path().string();
  if (fs::is_directory(folder, ec) && ::access(folder.c_str(), W_OK) == 0) {
    try {
      lock = std::make_unique<FolderLock>(folder, 10, fs::path(file).filename().string() + ".lock");
    } catch (const UserError& e) {
      return e.what();
    }
  }
  nlohmann::json merged = nlohmann::json::object();
  if (!read(merged).empty()) merged = entries_;  // what another process saved, else this one's
  for (const std::string& key : changed_)
    if (const auto it = entries_.find(key); it != entries_.end()) merged[key] = *it;
    else merged.erase(key);
  const std::string tmp = file + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    out << nlohmann::json{{"version", 1}, {section_, merged}}.dump(1) << "\n";
    if (!out.flush()) {
      const std::string why = std::strerror(errno);
      fs::remove(tmp, ec);
      return "could not write " + tmp + " (" + why + ")";
    }
  }
  fs::rename(tmp, file, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return "could not replace " + file;
  }
  entries_ = std::move(merged), changed_.clear();  // the file as written, the base of the next save
  return {};
}

}  // namespace brigade::io
