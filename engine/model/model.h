// A model: the sequence of layers, what goes in, and the loss at the end. Built from a TOML
// preset in models/ (embedded in the binary) or a user's TOML file.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/layer.h"

namespace brigade::model {

struct Model {
  std::string name;                 // "fashion-cnn"
  std::string config;               // the TOML text it was built from, overrides applied
  Shape input;                      // one sample: {1, 28, 28} images or {T} tokens
  bool token_input = false;         // int32 token ids rather than floats
  // The loss is mean cross-entropy over rows * targets_per_sample rows of `classes` logits:
  // the last layer's output per sample is targets_per_sample * classes floats.
  uint32_t classes = 0;
  uint32_t targets_per_sample = 1;  // 1 (a label per image) or T (a next token per position)
  // A GPT: the positions its wpe holds (block_size); input {T} may be fewer (with_window).
  // 0 for other models.
  uint32_t block_size = 0;
  std::vector<std::unique_ptr<Layer>> layers;

  // Every distinct parameter in model order (a tied parameter appears once).
  std::vector<ParamSpec> params() const;
  uint64_t parameter_count() const;  // Trainable elements, tied ones counted once
  // Per layer: whether its kernels take 16-bit tensors as stored on `device`
  // (Layer::stores_half): what a stage's plan needs to know of its device.
  std::vector<bool> stores_half(const vk::PhysicalInfo& device) const;
  // Layer::lean_scratch of every layer on the device.
  std::vector<uint8_t> lean_scratch(const vk::PhysicalInfo& device) const;
};

// The presets shipped in models/: {"fashion-cnn", "fashion-cnn-bn", "fashion-mlp", "gpt-mini", ...}.
std::vector<std::string> preset_names();

// Builds a preset by name, or a model from a TOML file when `name_or_path` ends in .toml.
// `overrides` are "key=value" TOML assignments applied to the top-level table before
// building (e.g. "n_layer=6"). Throws UserError naming the file or override and what is
// wrong.
Model build(const std::string& name_or_path, const std::vector<std::string>& overrides = {});
// Builds from TOML text; `source` names it in errors. Without a `name` key the model is named
// after `named_after` (default: `source`) without its directory and .toml: a checkpoint's
// TOML passes the file or preset the run started from.
Model build_from_toml(const std::string& text, const std::string& source,
                      const std::vector<std::string>& overrides = {}, const std::string& named_after = "");

// A GPT that runs `window` tokens per row (1 <= window <= block_size) instead of block_size,
// as nanoGPT's forward takes t <= block_size. Its parameters are the same (wpe keeps
// block_size rows), so parameters and checkpoints move between windows. Other models, or a
// window outside that range, are refused with a UserError.
Model with_window(const Model& m, uint32_t window);

// A shorter model whose layers' times stand for every layer of `m`: a GPT of one block (its
// embedding, one block's two layers, ln_f and lm_head), since its blocks run the same kernels
// on the same shapes; nullopt where no shorter model stands in (a GPT of one block, any
// sequential model). Layer l of `m` is timed by layer `layer[l]` of `model`.
struct StandIn {
  Model model;
  std::vector<uint32_t> layer;
};
std::optional<StandIn> stand_in(const Model& m);

// The initial values of one parameter, a pure function of (seed, spec.name, spec): the same
// seed gives the same model on every machine.
std::vector<float> initial_values(const ParamSpec& spec, uint64_t seed);

}  // namespace brigade::model
