// Builds models from TOML (engine/model/model.h): the embedded presets of models/ or a
// user's file, with "key=value" overrides. Two kinds of model:
//   a Sequential (the default): `input`, `classes` and [[layers]] tables, each with a `type`
//     ("flatten", "linear", ...) and that layer's hyper-parameters; parameter names are
//     "<index>.weight" etc., as PyTorch's nn.Sequential names them;
//   type = "gpt": nanoGPT's GPT from block_size, vocab_size, n_layer, n_head and n_embd.
// Every error is a UserError naming the file (or preset) and overrides, what is wrong and
// what was expected; one about a layer names its line too. The format: docs/MODELS.md.
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "model/layers.h"
#include "model/model.h"
#include "model/presets.h"
#include "util/error.h"

namespace brigade::model {
namespace {

using Keys = std::vector<std::string>;

const Keys kSequentialKeys = {"name", "type", "input", "classes", "layers"};
const Keys kGptKeys = {"name", "type", "block_size", "vocab_size", "n_layer", "n_head", "n_embd"};
const Keys kLayerTypes = {"flatten",   "linear",      "relu",     "gelu",
                          "conv2d",    "maxpool2d",   "batchnorm2d", "layernorm"};

// The kernels index every tensor with 32 bits: a per-sample activation, a saved tensor or a
// parameter of more elements is refused when the model is built.
constexpr uint64_t kMaxElements = std::numeric_limits<uint32_t>::max();
// Far deeper than real GPTs (GPT-3 has 96 blocks); bounds the work of building one.
constexpr uint32_t kMaxGptBlocks = 4096;

std::string join(const Keys& keys) {
  std::string out;
  for (const std::string& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

bool contains(const Keys& keys, const std::string& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

std::string show(const toml::node& node) {
  std::ostringstream os;
  node.visit([&](const auto& n) { os << n; });
  return os.str();
}

// The product of `dims`, saturating at UINT64_MAX.
template <class Dims>
uint64_t saturated_elements(const Dims& dims) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  uint64_t n = 1;
  for (const auto d : dims) {
    if (d <= 0) return 0;
    n = n > kMax / uint64_t(d) ? kMax : n * uint64_t(d);
  }
  return n;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string too_large(const std::string& what, uint64_t elements) {
  const bool saturated = elements == std::numeric_limits<uint64_t>::max();
  return what + " has " + (saturated ? "more than " : "") + std::to_string(elements) +
         " elements; at most " + std::to_string(kMaxElements) + " fit the kernels' 32-bit indexing";
}

// Refuses a layer whose output, saved tensors or parameters the kernels cannot index.
void check_sizes(const Layer& layer) {
  const uint64_t out = saturated_elements(layer.output_shape());
  if (out > kMaxElements) throw UserError(too_large("the output " + to_string(layer.output_shape()), out));
  for (const SavedSpec& saved : layer.saved())
    if (saved.per_sample > kMaxElements || saved.fixed > kMaxElements)
      throw UserError(too_large("the saved tensor '" + saved.name + "'",
                                std::max(saved.per_sample, saved.fixed)));
  for (const ParamSpec& p : layer.params()) {
    const uint64_t n = saturated_elements(p.shape);
    if (n > kMaxElements)
      throw UserError(too_large("parameter '" + p.name + "' " + shape_text(p.shape), n));
  }
}

// `source` with ":LINE" where `node` came from its text (not from an override): "x.toml:12".
std::string located(const std::string& source, const toml::node& node) {
  const toml::source_region& s = node.source();
  return s.begin.line && s.path && *s.path == source ? source + ":" + std::to_string(s.begin.line) : source;
}

// What a Reader refuses: its message already names the table.
struct TableError : UserError { using UserError::UserError; };

// Typed access to one TOML table. Errors name `where` ("gpt-mini with n_layer=2"); a layer's
// reader names `source` with the line of the key at fault, else of its table, then `rest`:
// "x.toml:12 with classes=4: layers[3] (linear)".
class Reader {
 public:
  Reader(const toml::table& table, std::string where) : table_(table), where_(std::move(where)) {}
  Reader(const toml::table& table, std::string source, std::string rest)
      : table_(table), where_(std::move(source)), rest_(std::move(rest)), lines_(true) {}

  [[noreturn]] void fail(const std::string& what, const toml::node* at = nullptr) const {
    throw TableError((lines_ ? located(where_, at ? *at : table_) + rest_ : where_) + ": " + what);
  }
  bool has(const std::string& key) const { return table_.contains(key); }
  const toml::node* at(const std::string& key) const { return table_.get(key); }

  void only(const Keys& allowed) const {
    for (auto&& [key, value] : table_)
      if (!contains(allowed, std::string(key.str())))
        fail("unknown key '" + std::string(key.str()) + "' (expected one of: " + join(allowed) + ")", &value);
  }

  // A positive integer (or, with `zero_ok`, a non-negative one) that fits 32 bits.
  uint32_t count(const std::string& key, bool zero_ok = false) const {
    const toml::node* node = table_.get(key);
    if (!node) fail("missing key '" + key + "' (" + count_kind(zero_ok) + ")");
    const std::optional<int64_t> v = node->value_exact<int64_t>();
    if (!v || *v < (zero_ok ? 0 : 1) || *v > std::numeric_limits<uint32_t>::max())
      fail("key '" + key + "' must be " + count_kind(zero_ok) + ", got " + show(*node), node);
    return uint32_t(*v);
  }
  uint32_t count_or(const std::string& key, uint32_t fallback, bool zero_ok = false) const {
    return has(key) ? count(key, zero_ok) : fallback;
  }

  bool flag_or(const std::string& key, bool fallback) const {
    const toml::node* node = table_.get(key);
    if (!node) return fallback;
    if (!node->is_boolean()) fail("key '" + key + "' must be true or false, got " + show(*node), node);
    return node->as_boolean()->get();
  }

  std::string text(const std::string& key) const {
    const toml::node* node = table_.get(key);
    if (!node) fail("missing key '" + key + "' (a string)");
    if (!node->is_string()) fail("key '" + key + "' must be a string, got " + show(*node), node);
    return node->as_string()->get();
  }
  std::string text_or(const std::string& key, const std::string& fallback) const {
    return has(key) ? text(key) : fallback;
  }

  // An array of one to three positive integers, e.g. [1, 28, 28].
  Shape shape(const std::string& key) const {
    const toml::node* node = table_.get(key);
    const std::string expected = "an array of one to three positive integers, e.g. [1, 28, 28]";
    if (!node) fail("missing key '" + key + "' (" + expected + ")");
    const toml::array* array = node->as_array();
    if (!array || array->empty() || array->size() > 3)
      fail("key '" + key + "' must be " + expected + ", got " + show(*node), node);
    Shape s;
    for (const toml::node& d : *array) {
      const std::optional<int64_t> v = d.value_exact<int64_t>();
      if (!v || *v < 1 || *v > std::numeric_limits<uint32_t>::max())
        fail("key '" + key + "' must be " + expected + ", got " + show(*node), node);
      s.push_back(uint32_t(*v));
    }
    const uint64_t n = saturated_elements(s);
    if (n > kMaxElements) fail(too_large("key '" + key + "' " + to_string(s), n), node);
    return s;
  }

 private:
  static std::string count_kind(bool zero_ok) {
    return zero_ok ? "a non-negative integer" : "a positive integer";
  }

  const toml::table& table_;
  std::string where_, rest_;
  bool lines_ = false;
};

// Whether a layer of `type` (after `prev`, before `next` and `after_next`) takes part in a
// ReLU fold: a relu goes into the maxpool2d right after it, else into the linear right before
// it (ReLU's `folded`). One pass over memory fewer, no tensor between them, the same values.
bool fold_relu(const std::string& type, const std::string& prev, const std::string& next,
               const std::string& after_next) {
  if (type == "relu") return next == "maxpool2d" || prev == "linear";
  if (type == "maxpool2d") return prev == "relu";
  if (type == "linear") return next == "relu" && after_next != "maxpool2d";
  return false;
}

// One [[layers]] table of a Sequential, `index` in it, given the incoming shape. `fold`: a
// relu and the neighbour that applies it (fold_relu), both given it. `pool`: a conv2d offered
// the relu and 2x2 maxpool2d after it (Conv2d's `pool`), or that maxpool2d, taken by it.
std::unique_ptr<Layer> sequential_layer(const Reader& r, const std::string& type, uint32_t index,
                                        const Shape& in, bool fold, bool pool) {
  const std::string prefix = std::to_string(index) + ".";
  const uint32_t channels = in.empty() ? 0 : in.front(), features = in.empty() ? 0 : in.back();
  if (type == "flatten" || type == "relu" || type == "gelu") {
    r.only({"type"});
    if (type == "flatten") return std::make_unique<Flatten>(in);
    if (type == "relu") return std::make_unique<ReLU>(in, fold);
    return std::make_unique<GELU>(in);
  }
  if (type == "linear") {
    r.only({"type", "in", "out", "bias"});
    return std::make_unique<Linear>(in, r.count_or("in", features), r.count("out"),
                                    r.flag_or("bias", true), prefix, fold);
  }
  if (type == "conv2d") {
    r.only({"type", "in", "out", "kernel", "stride", "padding", "bias"});
    return std::make_unique<Conv2d>(in, r.count_or("in", channels), r.count("out"),
                                    r.count("kernel"), r.count_or("stride", 1),
                                    r.count_or("padding", 0, true), r.flag_or("bias", true), prefix, pool);
  }
  if (type == "maxpool2d") {
    r.only({"type", "kernel", "stride"});
    const uint32_t kernel = r.count("kernel");
    return std::make_unique<MaxPool2d>(in, kernel, r.count_or("stride", kernel), fold, pool);
  }
  if (type == "batchnorm2d") {
    r.only({"type", "features"});
    // Its backward kernel writes the input gradient together with the parameters'.
    if (index == 0) r.fail("batchnorm2d cannot be the first layer");
    return std::make_unique<BatchNorm2d>(in, r.count_or("features", channels), prefix);
  }
  if (type == "layernorm") {
    r.only({"type", "features"});
    return std::make_unique<LayerNorm>(in, r.count_or("features", features), prefix);
  }
  r.fail("unknown layer type '" + type + "' (expected one of: " + join(kLayerTypes) + ")", r.at("type"));
}

// `source` names the text, `overrides` " with key=value, ..." (or "").
Model sequential(const toml::table& table, const Reader& r, const std::string& source,
                 const std::string& overrides, const std::string& default_name) {
  r.only(kSequentialKeys);
  Model m;
  m.name = r.text_or("name", default_name);
  m.input = r.shape("input");
  m.classes = r.count("classes");
  const toml::array* layers = table["layers"].as_array();
  if (r.has("layers") && !layers)
    r.fail("key 'layers' must be an array of tables ([[layers]] sections), got " + show(*r.at("layers")));
  if (!layers || layers->empty())
    r.fail("missing [[layers]] (a Sequential needs at least one layer table)");
  // The type of layer j, "" past the ends or where it is not a table with a string type.
  auto type_at = [&](size_t j) -> std::string {
    const toml::table* t = j < layers->size() ? (*layers)[j].as_table() : nullptr;
    const auto name = t ? (*t)["type"].value<std::string>() : std::nullopt;
    return name.value_or("");
  };
  // A conv2d, relu and maxpool2d of window and stride 2: the conv2d is offered the other two
  // (Conv2d's `pool`); `pooled_at`: the maxpool2d a conv2d took, a view from then on.
  auto pools_by_two = [&](size_t j) {
    const toml::table* t = j < layers->size() ? (*layers)[j].as_table() : nullptr;
    const auto kernel = t ? (*t)["kernel"].value<int64_t>() : std::nullopt;
    return type_at(j) == "maxpool2d" && kernel == 2 && (*t)["stride"].value<int64_t>().value_or(2) == 2;
  };
  size_t pooled_at = layers->size();
  Shape shape = m.input;
  for (uint32_t i = 0; i < layers->size(); ++i) {
    const std::string rest = overrides + ": layers[" + std::to_string(i) + "]";
    const toml::table* layer = (*layers)[i].as_table();
    if (!layer) throw UserError(located(source, (*layers)[i]) + rest + ": must be a table with a 'type' key");
    const std::string type = Reader(*layer, source, rest).text("type");
    const Reader lr(*layer, source, rest + " (" + type + ")");
    const bool fold = fold_relu(type, i > 0 ? type_at(i - 1) : "", type_at(i + 1), type_at(i + 2));
    const bool pool = type == "conv2d" ? type_at(i + 1) == "relu" && pools_by_two(i + 2) : i == pooled_at;
    try {
      m.layers.push_back(sequential_layer(lr, type, i, shape, fold, pool));
      if (const auto* conv = dynamic_cast<const Conv2d*>(m.layers.back().get()); conv && conv->pools())
        pooled_at = i + 2;
      check_sizes(*m.layers.back());
    } catch (const TableError&) {
      throw;
    } catch (const UserError& e) {
      lr.fail(e.what());  // the layer's own check: the line of its table
    }
    shape = m.layers.back()->output_shape();
  }
  if (elements(shape) != m.classes)
    r.fail("the last layer gives " + to_string(shape) + " = " + std::to_string(elements(shape)) +
           " values per sample, expected classes = " + std::to_string(m.classes));
  return m;
}

// nanoGPT's GPT: Embedding, n_layer blocks (each as two layers: attention, MLP), ln_f, the tied lm_head.
Model gpt(const Reader& r, const std::string& default_name, uint32_t window) {
  r.only(kGptKeys);
  Model m;
  m.name = r.text_or("name", default_name);
  const uint32_t block = r.count("block_size"), V = r.count("vocab_size"), L = r.count("n_layer"),
                 NH = r.count("n_head"), C = r.count("n_embd");
  const uint32_t T = window ? window : block;  // with_window has checked window <= block
  if (L > kMaxGptBlocks)
    r.fail("key 'n_layer' must be at most " + std::to_string(kMaxGptBlocks) + ", got " + std::to_string(L));
  if (C % NH)
    r.fail("n_embd " + std::to_string(C) + " is not divisible by n_head " + std::to_string(NH));
  m.input = {T};
  m.token_input = true;
  m.classes = V;
  m.targets_per_sample = T;
  m.block_size = block;
  std::string part = "embedding";
  try {
    m.layers.push_back(std::make_unique<Embedding>(V, block, T, C));
    check_sizes(*m.layers.back());
    part = "gpt block";
    for (uint32_t i = 0; i < L; ++i) {
      m.layers.push_back(std::make_unique<GptAttention>(i, T, C, NH, L));
      m.layers.push_back(std::make_unique<GptMlp>(i, T, C, L));
    }
    check_sizes(*m.layers[m.layers.size() - 2]);  // the blocks are alike
    check_sizes(*m.layers.back());
    part = "lm_head";
    m.layers.push_back(std::make_unique<LayerNorm>(Shape{T, C}, C, "transformer.ln_f."));
    m.layers.push_back(std::make_unique<LmHead>(T, C, V));
    check_sizes(*m.layers.back());
  } catch (const UserError& e) {
    r.fail(part + ": " + e.what());
  }
  return m;
}

// Assigns each "key=value" override to the top-level table, refusing keys the model's type
// does not know.
void apply_overrides(toml::table& table, const Keys& known, const std::string& type,
                     const std::vector<std::string>& overrides) {
  for (const std::string& o : overrides) {
    const std::string where = "override '" + o + "'";
    toml::table parsed;
    try {
      parsed = toml::parse(std::string_view(o), std::string_view("override"));
    } catch (const toml::parse_error& e) {
      throw UserError(where + ": not a TOML key=value assignment (" + std::string(e.description()) + ")");
    }
    if (parsed.size() != 1)
      throw UserError(where + ": expected exactly one key=value assignment, e.g. n_layer=2");
    const auto entry = parsed.begin();
    const std::string name(entry->first.str());
    if (name == "type" || !contains(known, name)) {
      Keys allowed;
      std::copy_if(known.begin(), known.end(), std::back_inserter(allowed),
                   [](const std::string& k) { return k != "type"; });
      throw UserError(where + ": unknown key '" + name + "' for a " + type +
                      " model (expected one of: " + join(allowed) + ")");
    }
    table.insert_or_assign(name, std::move(entry->second));
  }
}

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const PresetFile& f : preset_files()) names.emplace_back(f.name);
  return names;
}

namespace {

Model build_toml(const std::string& text, const std::string& source,
                 const std::vector<std::string>& overrides, uint32_t window, const std::string& named_after) {
  toml::table table;
  try {
    table = toml::parse(std::string_view(text), std::string_view(source));
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    throw UserError(source + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) +
                    ": malformed TOML: " + std::string(e.description()));
  }
  const std::string type = Reader(table, source).text_or("type", "sequential");
  if (type != "sequential" && type != "gpt")
    throw UserError(source + ": unknown model type '" + type + "' (expected sequential or gpt)");
  const Keys& known = type == "gpt" ? kGptKeys : kSequentialKeys;
  apply_overrides(table, known, type, overrides);

  std::string with;
  for (size_t i = 0; i < overrides.size(); ++i) with += (i ? ", " : " with ") + overrides[i];
  const Reader r(table, source + with);
  const std::string default_name = std::filesystem::path(named_after.empty() ? source : named_after).stem().string();
  Model m = type == "gpt" ? gpt(r, default_name, window) : sequential(table, r, source, with, default_name);
  // The text as given (comments kept) when nothing was overridden, else the table re-written.
  if (overrides.empty()) {
    m.config = text;
  } else {
    std::ostringstream os;
    os << table << "\n";
    m.config = os.str();
  }
  return m;
}

}  // namespace

Model build_from_toml(const std::string& text, const std::string& source,
                      const std::vector<std::string>& overrides, const std::string& named_after) {
  return build_toml(text, source, overrides, 0, named_after);
}

Model with_window(const Model& m, uint32_t window) {
  if (!m.block_size)
    throw UserError(m.name + " is not a GPT: only a GPT's token windows can be shorter than its block");
  if (window == 0 || window > m.block_size)
    throw UserError(m.name + " takes windows of 1 to " + std::to_string(m.block_size) +
                    " tokens (its block_size), not " + std::to_string(window));
  Model w = build_toml(m.config, m.name, {}, window, "");
  w.name = m.name;
  return w;
}

std::optional<StandIn> stand_in(const Model& m) {
  const uint32_t L = uint32_t(m.layers.size());
  if (!m.block_size || L < 7) return std::nullopt;  // embedding, 2 blocks of two layers, ln_f, lm_head
  StandIn s{build_toml(m.config, m.name, {"n_layer=1"}, m.input.at(0), ""), {}};
  s.model.name = m.name;
  // Its layers: 0 the embedding, 1 attention, 2 the MLP, 3 ln_f, 4 lm_head.
  for (uint32_t l = 0; l < L; ++l) s.layer.push_back(l == 0 ? 0 : l == L - 2 ? 3 : l == L - 1 ? 4 : l % 2 ? 1 : 2);
  return s;
}

Model build(const std::string& name_or_path, const std::vector<std::string>& overrides) {
  if (name_or_path.ends_with(".toml")) {
    std::error_code ec;
    if (std::filesystem::is_directory(name_or_path, ec))
      throw UserError(name_or_path + ": is a directory, not a model file");
    errno = 0;
    std::ifstream in(name_or_path, std::ios::binary);
    const int err = errno;  // why it did not open
    if (!in)
      throw UserError(name_or_path + ": cannot read the model file (" + (err ? std::strerror(err) : "unknown") + ")");
    std::ostringstream text;
    text << in.rdbuf();
    return build_from_toml(text.str(), name_or_path, overrides);
  }
  for (const PresetFile& f : preset_files())
    if (name_or_path == f.name) return build_from_toml(f.text, f.name, overrides);
  throw UserError("unknown model preset '" + name_or_path + "' (known presets: " +
                  join(preset_names()) + "; or give a path to a .toml file)");
}

}  // namespace brigade::model
