// What the recovery tests of one process (cli) and of ranks (ranks) share: a re-plan's flags
// as a command line, and two checkpoints compared tensor by tensor.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "io/safetensors.h"

namespace brigade::test {

// The pipeline flags a re-plan chose (its metrics record's "flags") as a command line.
inline std::string flags_of(const nlohmann::json& f) {
  std::string out = "--devices " + f.at("devices").get<std::string>() + " --micro-batches " +
                    std::to_string(f.at("micro_batches").get<uint32_t>()) + " --schedule " + f.at("schedule").get<std::string>() +
                    " --remat " + f.at("remat").get<std::string>() + " --precision " + f.at("precision").get<std::string>() +
                    " --balance " + f.at("balance").get<std::string>();
  if (f.at("schedule") == "interleaved") out += " --virtual-stages " + std::to_string(f.at("virtual_stages").get<uint32_t>());
  return out;
}

// Every parameter and optimizer state of two checkpoints, equal value for value.
inline void same_tensors(const std::filesystem::path& a, const std::filesystem::path& b) {
  const io::SafeTensors x = io::SafeTensors::load(a.string()), y = io::SafeTensors::load(b.string());
  REQUIRE(x.names() == y.names());
  for (const std::string& name : x.names()) CHECK_MESSAGE(x.f32(name) == y.f32(name), name);
}

}  // namespace brigade::test
