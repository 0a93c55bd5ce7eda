// Writes the seed corpora of tests/fuzz/corpus with the project's own writers:
//   fuzz_seeds DIR   ->  DIR/safetensors, DIR/idx, DIR/config
// safetensors: the initial parameters and a batch of each model in tiny_models.h, and a few
// files that are nearly right; idx: a tiny image and label set, plain and gzip; config: the
// presets of models/, the tiny models, and a file with overrides.
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "io/tensors.h"
#include "model/presets.h"
#include "tiny_models.h"
#include "../support/tiny_data.h"

using namespace brigade;
namespace fs = std::filesystem;
using test::gzip;

namespace {

void write(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), long(bytes.size()));
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::vector<uint8_t> idx(const std::vector<uint32_t>& dims, uint8_t modulus) {
  std::vector<uint8_t> b = {0, 0, 0x08, uint8_t(dims.size())};
  uint64_t n = 1;
  for (uint32_t d : dims) {
    n *= d;
    for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(d >> s));
  }
  for (uint64_t i = 0; i < n; ++i) b.push_back(uint8_t(i * 37 % modulus));
  return b;
}

void safetensors_seeds(const fs::path& dir) {
  for (const model::Model& m : fuzz::tiny_models()) {
    io::initial_parameters(m, 1).write((dir / ("params-" + m.name + ".safetensors")).string());
    const uint32_t rows = 2;
    io::SafeTensorsWriter batch;
    std::vector<int64_t> input_shape{rows};
    for (uint32_t d : m.input) input_shape.push_back(d);
    const uint64_t per_row = model::elements(m.input);
    if (m.token_input) {
      std::vector<int32_t> tokens(rows * per_row);
      for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t(i * 5 % m.classes);
      batch.add("input", input_shape, tokens);
      batch.add("target", {rows, int64_t(m.targets_per_sample)}, tokens);
    } else {
      std::vector<float> images(rows * per_row);
      for (size_t i = 0; i < images.size(); ++i) images[i] = float(i % 7) / 7.0f;
      const std::vector<int32_t> labels = {0, int32_t(m.classes) - 1};
      batch.add("input", input_shape, images);
      batch.add("target", {rows}, labels);
    }
    batch.write((dir / ("batch-" + m.name + ".safetensors")).string());
  }
  // I64 tokens, a scalar, an empty tensor and metadata: the other things files hold.
  io::SafeTensorsWriter mixed;
  const int64_t tokens[] = {1, 2, 3, 4, 5, 6, 7, 8};
  const int64_t step = 3;
  const float loss = 2.5f;
  mixed.add("input", io::DType::I64, {2, 4}, tokens, sizeof tokens);
  mixed.add("target", io::DType::I64, {2, 4}, tokens, sizeof tokens);
  mixed.add("1.num_batches_tracked", io::DType::I64, {}, &step, sizeof step);
  mixed.add("loss", {1}, std::span<const float>(&loss, 1));
  mixed.add("empty", {0, 3}, std::span<const float>());
  mixed.set_metadata("format", "brigade-checkpoint 1");
  mixed.set_metadata("step", "3");
  mixed.write((dir / "mixed.safetensors").string());
  // Nearly right: the data section one byte short.
  std::vector<uint8_t> short_file = mixed.serialize();
  short_file.pop_back();
  write(dir / "truncated.safetensors", short_file);
}

void idx_seeds(const fs::path& dir) {
  const auto images = idx({3, 4, 4}, 251), labels = idx({3}, 10);
  write(dir / "images-idx3-ubyte", images);
  write(dir / "labels-idx1-ubyte", labels);
  write(dir / "images-idx3-ubyte.gz", gzip(images));
  auto truncated = gzip(labels);
  truncated.resize(truncated.size() - 4);
  write(dir / "labels-truncated.gz", truncated);
}

void config_seeds(const fs::path& dir) {
  for (const model::PresetFile& f : model::preset_files()) write(dir / (std::string(f.name) + ".toml"), f.text);
  for (const auto& [name, text] : fuzz::kTinyModels) write(dir / (std::string(name) + ".toml"), text);
  write(dir / "tiny-gpt-overrides.toml", std::string(fuzz::kTinyModels[2][1]) + "%%\nn_layer=2\nblock_size=8\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR  (writes DIR/safetensors, DIR/idx, DIR/config)\n", argv[0]);
    return 2;
  }
  const fs::path root = argv[1];
  for (const char* sub : {"safetensors", "idx", "config"}) fs::create_directories(root / sub);
  safetensors_seeds(root / "safetensors");
  idx_seeds(root / "idx");
  config_seeds(root / "config");
  return 0;
}
