#include "ranks.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string_view>

#include "io/files.h"

namespace brigade::cli {
namespace {

mpi::World* g_world = nullptr;

}  // namespace

mpi::World& world() {
  BRIGADE_EXPECT(g_world, "main() made the world");
  return *g_world;
}

void set_world(mpi::World* w) { g_world = w; }

void agree(const std::string& what, const std::string& mine) {
  mpi::World& w = world();
  if (!w.multi()) return;
  const std::vector<std::string> all = w.allgather(mine);
  for (uint32_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0])
      throw EveryRankError("the ranks disagree: rank " + std::to_string(r) + " has " + what + " '" + all[r] +
                          "', rank 0 has '" + all[0] + "'; start every rank with the same program, flags and files");
}

std::string file_hash(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) return "";
  const std::vector<uint8_t> bytes = io::read_file(path);
  char hex[17];
  const std::string_view chars(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  std::snprintf(hex, sizeof hex, "%016zx", std::hash<std::string_view>{}(chars));
  return std::string(hex) + " (" + std::to_string(bytes.size()) + " bytes)";
}

bool any(bool mine) {
  mpi::World& w = world();
  if (!w.multi()) return mine;
  for (const std::string& s : w.allgather(mine ? "1" : "0"))
    if (s == "1") return true;
  return false;
}

std::string pack(const std::map<std::string, std::vector<float>>& tensors) {
  std::string out;
  for (const auto& [name, values] : tensors) {
    const uint64_t header[2] = {name.size(), values.size()};
    out.append(reinterpret_cast<const char*>(header), sizeof header);
    out += name;
    out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  }
  return out;
}

std::map<std::string, std::vector<float>> unpack(const std::string& bytes) {
  std::map<std::string, std::vector<float>> out;
  size_t at = 0;
  while (at < bytes.size()) {
    uint64_t header[2];
    BRIGADE_EXPECT(at + sizeof header <= bytes.size(), "a whole tensor header");
    std::memcpy(header, bytes.data() + at, sizeof header);
    at += sizeof header;
    BRIGADE_EXPECT(at + header[0] + header[1] * sizeof(float) <= bytes.size(), "a whole tensor");
    const std::string name = bytes.substr(at, header[0]);
    at += header[0];
    std::vector<float> v(header[1]);
    std::memcpy(v.data(), bytes.data() + at, v.size() * sizeof(float));
    at += v.size() * sizeof(float);
    out.emplace(name, std::move(v));
  }
  return out;
}

std::map<std::string, std::vector<float>> gather_tensors(const std::map<std::string, std::vector<float>>& mine) {
  if (!world().multi()) return mine;
  std::map<std::string, std::vector<float>> out;
  for (const std::string& bytes : world().allgather(pack(mine)))
    for (auto& [name, values] : unpack(bytes)) out.emplace(name, std::move(values));
  return out;
}

pipeline::Trace gather_trace(const pipeline::Trace& mine, uint32_t stages) {
  if (!world().multi()) return mine;
  const std::vector<std::string> all = world().allgather(mine.to_json());
  pipeline::Trace out = pipeline::Trace::from_json(all[0]);
  for (uint32_t r = 1; r < stages; ++r) out.merge(pipeline::Trace::from_json(all[r]));
  out.ranks.resize(stages);
  for (uint32_t k = 0; k < stages; ++k) out.ranks[k] = k;
  return out;
}

}  // namespace brigade::cli
