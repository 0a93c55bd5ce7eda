// Small models whose parameters and batches the safetensors corpus holds: one of each kind of
// layer, so the reader meets F32 images, I32 tokens, BatchNorm buffers and a tied GPT.
#pragma once

#include <vector>

#include "model/model.h"

namespace brigade::fuzz {

inline const char* const kTinyModels[][2] = {
    {"tiny-mlp", R"(input = [6]
classes = 3
[[layers]]
type = "linear"
out = 4
[[layers]]
type = "relu"
[[layers]]
type = "linear"
out = 3
)"},
    {"tiny-cnn", R"(input = [1, 4, 4]
classes = 3
[[layers]]
type = "conv2d"
out = 2
kernel = 3
padding = 1
bias = false
[[layers]]
type = "batchnorm2d"
[[layers]]
type = "relu"
[[layers]]
type = "maxpool2d"
kernel = 2
[[layers]]
type = "flatten"
[[layers]]
type = "linear"
out = 3
)"},
    {"tiny-gpt", R"(type = "gpt"
block_size = 4
vocab_size = 16
n_layer = 1
n_head = 2
n_embd = 4
)"},
};

inline std::vector<model::Model> tiny_models() {
  std::vector<model::Model> out;
  for (const auto& [name, text] : kTinyModels) out.push_back(model::build_from_toml(text, name));
  return out;
}

}  // namespace brigade::fuzz
