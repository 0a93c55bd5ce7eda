// The model presets of models/*.toml, embedded at build time by cmake/presets.cmake.
#pragma once

#include <span>

namespace brigade::model {

struct PresetFile {
  const char* name;  // the file name without .toml: "fashion-cnn"
  const char* text;  // its TOML text
};

// Sorted by name.
std::span<const PresetFile> preset_files();

}  // namespace brigade::model
