// The TOML builder: presets against PyTorch's state_dict names and shapes, overrides, and
// the errors a user sees.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "model/layers.h"
#include "model/model.h"
#include "util/error.h"

namespace model_builder_test {

using namespace brigade;

namespace {

using Params = std::vector<std::pair<std::string, std::vector<int64_t>>>;

void check_params(const model::Model& m, const Params& want) {
  const auto got = m.params();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].name == want[i].first);
    CHECK(got[i].shape == want[i].second);
  }
}

Params gpt_params(int64_t V, int64_t T, int64_t C, int n_layer) {
  Params p = {{"transformer.wte.weight", {V, C}}, {"transformer.wpe.weight", {T, C}}};
  for (int i = 0; i < n_layer; ++i) {
    const std::string h = "transformer.h." + std::to_string(i) + ".";
    const Params block = {{h + "ln_1.weight", {C}},
                          {h + "ln_1.bias", {C}},
                          {h + "attn.c_attn.weight", {3 * C, C}},
                          {h + "attn.c_attn.bias", {3 * C}},
                          {h + "attn.c_proj.weight", {C, C}},
                          {h + "attn.c_proj.bias", {C}},
                          {h + "ln_2.weight", {C}},
                          {h + "ln_2.bias", {C}},
                          {h + "mlp.c_fc.weight", {4 * C, C}},
                          {h + "mlp.c_fc.bias", {4 * C}},
                          {h + "mlp.c_proj.weight", {C, 4 * C}},
                          {h + "mlp.c_proj.bias", {C}}};
    p.insert(p.end(), block.begin(), block.end());
  }
  p.push_back({"transformer.ln_f.weight", {C}});
  p.push_back({"transformer.ln_f.bias", {C}});
  return p;
}

// The message of the UserError `f` throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

const char* kTiny = R"(
name = "tiny"
input = [6]
classes = 3

[[layers]]
type = "linear"
in = 6
out = 4

[[layers]]
type = "relu"

[[layers]]
type = "linear"
out = 3
)";

}  // namespace

TEST_CASE("the presets are embedded") {
  const auto names = model::preset_names();
  for (const char* n : {"fashion-cnn", "fashion-cnn-bn", "fashion-mlp", "gpt-mini"})
    CHECK(std::find(names.begin(), names.end(), n) != names.end());
}

TEST_CASE("fashion-mlp matches PyTorch's Sequential") {
  const model::Model m = model::build("fashion-mlp");
  CHECK(m.name == "fashion-mlp");
  CHECK(m.input == model::Shape{1, 28, 28});
  CHECK(!m.token_input);
  CHECK(m.classes == 10);
  CHECK(m.targets_per_sample == 1);
  REQUIRE(m.layers.size() == 6);
  const char* kinds[] = {"flatten", "linear", "relu", "linear", "relu", "linear"};
  for (size_t i = 0; i < 6; ++i) CHECK(m.layers[i]->kind() == kinds[i]);
  // Each relu is folded into the linear before it: a view that keeps its index and kind.
  CHECK(m.layers[2]->is_view());
  CHECK(m.layers[4]->is_view());
  check_params(m, {{"1.weight", {256, 784}}, {"1.bias", {256}}, {"3.weight", {128, 256}},
                   {"3.bias", {128}}, {"5.weight", {10, 128}}, {"5.bias", {10}}});
  CHECK(m.parameter_count() == 235146);
}

TEST_CASE("fashion-cnn matches PyTorch's Sequential") {
  const model::Model m = model::build("fashion-cnn");
  REQUIRE(m.layers.size() == 10);
  // Each relu before a maxpool2d is folded away: a view that keeps its index and kind.
  for (size_t i : {1, 4}) {
    CHECK(m.layers[i]->kind() == "relu");
    CHECK(m.layers[i]->is_view());
  }
  CHECK(m.layers[8]->is_view());  // folded into the linear before it
  // Each conv2d takes the relu and maxpool2d after it too: its output is the pooled one, and
  // the maxpool2d a view.
  for (size_t i : {0, 3}) {
    CHECK(static_cast<const model::Conv2d&>(*m.layers[i]).pools());
    CHECK(m.layers[i + 2]->is_view());
  }
  CHECK(m.layers[0]->output_shape() == model::Shape{32, 14, 14});
  CHECK(m.layers[2]->output_shape() == model::Shape{32, 14, 14});
  CHECK(m.layers[3]->output_shape() == model::Shape{64, 7, 7});
  CHECK(m.layers[5]->output_shape() == model::Shape{64, 7, 7});
  CHECK(m.layers[6]->input_shape() == model::Shape{64, 7, 7});
  CHECK(m.layers.back()->output_shape() == model::Shape{10});
  check_params(m, {{"0.weight", {32, 1, 3, 3}}, {"0.bias", {32}}, {"3.weight", {64, 32, 3, 3}},
                   {"3.bias", {64}}, {"7.weight", {128, 3136}}, {"7.bias", {128}},
                   {"9.weight", {10, 128}}, {"9.bias", {10}}});
  CHECK(m.parameter_count() == 421642);
}

TEST_CASE("a conv2d takes the relu and maxpool2d after it only for 2x2 windows at stride 2") {
  const auto pools = [](const std::string& pool, uint32_t channels, uint32_t side) {
    const std::string text = "name = \"t\"\ninput = [1, 8, 8]\nclasses = 2\n"
                             "[[layers]]\ntype = \"conv2d\"\nin = 1\nout = " + std::to_string(channels) +
                             "\nkernel = 3\npadding = 1\n[[layers]]\ntype = \"relu\"\n[[layers]]\ntype = \"maxpool2d\"\n" + pool +
                             "[[layers]]\ntype = \"flatten\"\n[[layers]]\ntype = \"linear\"\nout = 2\n";
    const model::Model m = model::build_from_toml(text, "t.toml");
    const bool taken = static_cast<const model::Conv2d&>(*m.layers[0]).pools();
    CHECK(m.layers[2]->is_view() == taken);
    CHECK(m.layers[3]->output_shape() == model::Shape{channels * side * side});
    return taken;
  };
  CHECK(pools("kernel = 2\n", 4, 4));
  CHECK(pools("kernel = 2\nstride = 2\n", 8, 4));
  CHECK_FALSE(pools("kernel = 3\nstride = 2\n", 4, 3));
  CHECK(pools("kernel = 2\n", 6, 4));  // on tiles: codes of 6 channels are not whole words a pair
}

TEST_CASE("fashion-cnn-bn matches PyTorch's Sequential") {
  const model::Model m = model::build("fashion-cnn-bn");
  REQUIRE(m.layers.size() == 12);
  check_params(m, {{"0.weight", {32, 1, 3, 3}},
                   {"1.weight", {32}},
                   {"1.bias", {32}},
                   {"1.running_mean", {32}},
                   {"1.running_var", {32}},
                   {"1.stats", {32, 3}},
                   {"4.weight", {64, 32, 3, 3}},
                   {"5.weight", {64}},
                   {"5.bias", {64}},
                   {"5.running_mean", {64}},
                   {"5.running_var", {64}},
                   {"5.stats", {64, 3}},
                   {"9.weight", {128, 3136}},
                   {"9.bias", {128}},
                   {"11.weight", {10, 128}},
                   {"11.bias", {10}}});
  // Trainable only: 288 + 64 + 18432 + 128 + 401536 + 1290.
  CHECK(m.parameter_count() == 421738);
}

TEST_CASE("gpt-mini matches nanoGPT with the lm_head tied") {
  const model::Model m = model::build("gpt-mini");
  CHECK(m.token_input);
  CHECK(m.input == model::Shape{128});
  CHECK(m.classes == 256);
  CHECK(m.targets_per_sample == 128);
  REQUIRE(m.layers.size() == 11);  // each block as its attention and its MLP
  CHECK(m.layers.front()->kind() == "embedding");
  for (size_t i = 1; i < 9; ++i) CHECK(m.layers[i]->kind() == (i % 2 ? "gpt_attention" : "gpt_mlp"));
  CHECK(m.layers[9]->kind() == "layernorm");
  CHECK(m.layers.back()->kind() == "lm_head");
  CHECK(m.layers.back()->output_shape() == model::Shape{128, 256});
  check_params(m, gpt_params(256, 128, 128, 4));
  CHECK(m.parameter_count() == 842496);
}

TEST_CASE("a GPT on shorter windows keeps its parameters, and other windows and models are refused") {
  const model::Model full = model::build("gpt-mini");
  CHECK(full.block_size == 128);
  const model::Model m = model::with_window(full, 24);
  CHECK(m.name == full.name);
  CHECK(m.block_size == 128);
  CHECK(m.input == model::Shape{24});
  CHECK(m.targets_per_sample == 24);
  CHECK(m.layers.back()->output_shape() == model::Shape{24, 256});
  check_params(m, gpt_params(256, 128, 128, 4));  // wpe keeps block_size rows
  CHECK(model::with_window(full, 128).input == full.input);
  CHECK_THROWS_WITH_AS(model::with_window(full, 129), doctest::Contains("windows of 1 to 128 tokens"), UserError);
  CHECK_THROWS_WITH_AS(model::with_window(full, 0), doctest::Contains("not 0"), UserError);
  CHECK_THROWS_WITH_AS(model::with_window(model::build("fashion-mlp"), 8), doctest::Contains("is not a GPT"),
                       UserError);
  CHECK(model::build("fashion-mlp").block_size == 0);
}

TEST_CASE("a GPT's stand-in is one block, each layer timed by one of the same kind, shapes and parameters") {
  // What makes a layer's time: its kernels (kind), the shapes they run on, and its parameters'
  // shapes. Names differ (transformer.h.3 against h.0) and do not count.
  const auto alike = [](const model::Layer& a, const model::Layer& b) {
    if (a.kind() != b.kind() || a.input_shape() != b.input_shape() || a.output_shape() != b.output_shape())
      return false;
    const std::vector<model::ParamSpec> pa = a.params(), pb = b.params();
    if (pa.size() != pb.size()) return false;
    for (size_t i = 0; i < pa.size(); ++i)
      if (pa[i].shape != pb[i].shape || pa[i].kind != pb[i].kind || pa[i].product != pb[i].product) return false;
    return a.cost().flops == b.cost().flops;
  };
  for (const model::Model& m : {model::build("gpt-mini"), model::with_window(model::build("gpt-small"), 40),
                                model::build("gpt-mini", {"n_layer=2"})}) {
    CAPTURE(m.name);
    CAPTURE(m.layers.size());
    const std::optional<model::StandIn> s = model::stand_in(m);
    REQUIRE(s);
    CHECK(s->model.layers.size() == 5);
    CHECK(s->model.name == m.name);
    CHECK(s->model.input == m.input);
    REQUIRE(s->layer.size() == m.layers.size());
    std::set<uint32_t> used;
    for (size_t l = 0; l < m.layers.size(); ++l) {
      CAPTURE(l);
      REQUIRE(s->layer[l] < s->model.layers.size());
      CHECK(alike(*m.layers[l], *s->model.layers[s->layer[l]]));
      used.insert(s->layer[l]);
    }
    CHECK(used.size() == 5);  // every layer of the stand-in times some layer
  }
  CHECK_FALSE(model::stand_in(model::build("gpt-mini", {"n_layer=1"})));  // no shorter model
  CHECK_FALSE(model::stand_in(model::build("fashion-cnn")));
}

TEST_CASE("overrides change the model and its config") {
  const model::Model m = model::build("gpt-mini", {"n_layer=2", "block_size=16"});
  CHECK(m.layers.size() == 7);
  CHECK(m.input == model::Shape{16});
  check_params(m, gpt_params(256, 16, 128, 2));
  CHECK(m.config.find("n_layer = 2") != std::string::npos);
  const model::Model again = model::build_from_toml(m.config, "config");
  CHECK(again.params().size() == m.params().size());
  CHECK(model::build("gpt-mini").config.find("n_layer = 4") != std::string::npos);
}

TEST_CASE("a model builds from a TOML file") {
  const std::string path = "brigade_builder_test_tiny.toml";
  std::ofstream(path) << kTiny;
  const model::Model m = model::build(path);
  std::remove(path.c_str());
  check_params(m, {{"0.weight", {4, 6}}, {"0.bias", {4}}, {"2.weight", {3, 4}}, {"2.bias", {3}}});
  CHECK(error_of([] { model::build("no/such/model.toml"); }).find("cannot read") != std::string::npos);
}

TEST_CASE("builder errors name the source and the problem") {
  const std::string unknown = error_of([] { model::build("gpt-huge"); });
  CHECK(unknown.find("unknown model preset 'gpt-huge'") != std::string::npos);
  CHECK(unknown.find("fashion-mlp") != std::string::npos);

  CHECK(error_of([] { model::build_from_toml("name = \"x\"\ninput = [1, 2", "bad.toml"); })
            .starts_with("bad.toml:2:"));
  CHECK(error_of([] { model::build("gpt-mini", {"n_layers=2"}); })
            .find("override 'n_layers=2': unknown key 'n_layers'") != std::string::npos);
  CHECK(error_of([] { model::build("gpt-mini", {"n_layer=="}); })
            .find("override 'n_layer==': not a TOML key=value assignment") != std::string::npos);
  CHECK(error_of([] { model::build("gpt-mini", {"n_head=3"}); })
            .find("gpt-mini with n_head=3: n_embd 128 is not divisible by n_head 3") != std::string::npos);
  CHECK(error_of([] { model::build("gpt-mini", {"n_layer=\"four\""}); })
            .find("key 'n_layer' must be a positive integer, got 'four'") != std::string::npos);

  std::string text = kTiny;
  text.replace(text.find("in = 6"), 6, "in = 5");
  CHECK(error_of([&] { model::build_from_toml(text, "t.toml"); })
            .find("t.toml:6: layers[0] (linear): linear in_features 5 does not match the incoming "
                  "shape [6]") != std::string::npos);
  text = kTiny;
  text.replace(text.find("\"relu\""), 6, "\"tanh\"");
  CHECK(error_of([&] { model::build_from_toml(text, "t.toml"); })
            .find("t.toml:12: layers[1] (tanh): unknown layer type 'tanh'") != std::string::npos);
  text = kTiny;
  text.replace(text.find("out = 3"), 7, "out = 5");
  CHECK(error_of([&] { model::build_from_toml(text, "t.toml"); })
            .find("expected classes = 3") != std::string::npos);
  text = kTiny;
  text.replace(text.find("classes = 3"), 11, "");
  CHECK(error_of([&] { model::build_from_toml(text, "t.toml"); })
            .find("t.toml: missing key 'classes'") != std::string::npos);
  text = kTiny;
  text += "dropout = 0.1\n";
  CHECK(error_of([&] { model::build_from_toml(text, "t.toml"); })
            .find("unknown key 'dropout'") != std::string::npos);
}

TEST_CASE("models the kernels cannot index or that are absurdly deep are refused when built") {
  // Each of these was accepted before: the first two with 32-bit sizes that wrapped around
  // (a Flatten of [65537, 65537, 1] claimed 131073 values per sample), the last after
  // minutes of building and gigabytes of memory.
  CHECK(error_of([] { model::build_from_toml("input = [65537, 65537, 1]\nclasses = 2\n[[layers]]\ntype = \"flatten\"\n", "big.toml"); })
            .find("big.toml: key 'input' [65537, 65537, 1] has 4295098369 elements; at most 4294967295 "
                  "fit the kernels' 32-bit indexing") != std::string::npos);
  CHECK(error_of([] { model::build_from_toml("input = [65536]\nclasses = 65536\n[[layers]]\ntype = \"linear\"\nout = 65536\n", "big.toml"); })
            .find("big.toml:3: layers[0] (linear): parameter '0.weight' [65536, 65536] has 4294967296 elements") !=
        std::string::npos);
  CHECK(error_of([] { model::build("gpt-mini", {"n_embd=1073741824", "n_head=1"}); })
            .find("gpt-mini with n_embd=1073741824, n_head=1: embedding: the output [128, 1073741824] has "
                  "137438953472 elements") != std::string::npos);
  CHECK(error_of([] { model::build("gpt-mini", {"n_layer=100000"}); })
            .find("gpt-mini with n_layer=100000: key 'n_layer' must be at most 4096, got 100000") != std::string::npos);
  CHECK(model::build("gpt-mini", {"n_layer=2", "n_embd=8", "n_head=2"}).layers.size() == 7);
}

TEST_CASE("conv2d padding that wraps 32 bits is refused, not folded into a small output") {
  const std::string text = R"(input = [1, 28, 28]
classes = 10
[[layers]]
type = "conv2d"
out = 1
kernel = 3
padding = 2147483647
)";
  CHECK(error_of([&] { model::build_from_toml(text, "pad.toml"); })
            .find("pad.toml:3: layers[0] (conv2d): conv2d: the padded input is larger than 4294967295") !=
        std::string::npos);
}

TEST_CASE("a conv2d kernel or maxpool2d window past its input is refused naming the sample's shape") {
  const std::string pool = "input = [3, 1, 6]\nclasses = 3\nlayers = [ { type = \"maxpool2d\", kernel = 2 } ]\n";
  CHECK(error_of([&] { model::build_from_toml(pool, "pool.toml"); }) ==
        "pool.toml:3: layers[0] (maxpool2d): maxpool2d: the window 2 is larger than the input [3, 1, 6]");
  const std::string conv = "input = [3, 4, 4]\nclasses = 4\nlayers = [ { type = \"conv2d\", out = 4, kernel = 7, padding = 1 } ]\n";
  CHECK(error_of([&] { model::build_from_toml(conv, "conv.toml"); }) ==
        "conv.toml:3: layers[0] (conv2d): conv2d: the kernel 7 is larger than the input [3, 4, 4] padded by 1");
}

TEST_CASE("builder errors stay on one line whatever the file holds") {
  const std::string toml = error_of([] { model::build_from_toml("a = i\n", "x.toml"); });
  CHECK(toml.starts_with("x.toml:1:6: malformed TOML"));
  CHECK(toml.find('\n') == std::string::npos);
  const std::string type = error_of([] {
    model::build_from_toml("input = [2]\nclasses = 2\n[[layers]]\ntype = \"re\\nlu\"\n", "x.toml");
  });
  CHECK(type.find("x.toml:4: layers[0] (re\\nlu): unknown layer type 're\\nlu'") != std::string::npos);
}

TEST_CASE("an error about a layer names the line of the key at fault, else of its layer's table") {
  // kTiny's lines: 6 [[layers]] (linear), 8 in = 6, 9 out = 4, 11 [[layers]] (relu),
  // 12 type = "relu", 14 [[layers]] (linear), 16 out = 3.
  const auto error = [](const std::string& from, const std::string& to,
                        const std::vector<std::string>& overrides = {}) {
    std::string text = kTiny;
    text.replace(text.find(from), from.size(), to);
    return error_of([&] { model::build_from_toml(text, "m.toml", overrides); });
  };
  CHECK(error("out = 4", "out = 0").starts_with("m.toml:9: layers[0] (linear): key 'out' must be a positive integer, got 0"));
  CHECK(error("out = 4", "out = 4\nbias = 1").starts_with("m.toml:10: layers[0] (linear): key 'bias' must be true or false, got 1"));
  CHECK(error("\"relu\"", "\"relu\"\nalpha = 1")
            .starts_with("m.toml:13: layers[1] (relu): unknown key 'alpha' (expected one of: type)"));
  CHECK(error("out = 3", "").starts_with("m.toml:14: layers[2] (linear): missing key 'out' (a positive integer)"));
  CHECK(error("type = \"relu\"", "type = 1").starts_with("m.toml:12: layers[1]: key 'type' must be a string, got 1"));
  // A layer's own check names its table; an override that caused it is named too.
  CHECK(error("in = 6", "in = 5").starts_with("m.toml:6: layers[0] (linear): linear in_features 5 does not match"));
  CHECK(error("", "", {"input=[5]"})
            .starts_with("m.toml:6 with input=[5]: layers[0] (linear): linear in_features 6 does not match"));
  // Layers given by an override have no line in the file.
  CHECK(error("", "", {"layers=[{type=\"linear\", out=0}]"})
            .starts_with("m.toml with layers=[{type=\"linear\", out=0}]: layers[0] (linear): key 'out' must be"));
  CHECK(error_of([] { model::build_from_toml("input = [2]\nclasses = 2\nlayers = [\n  {type = \"relu\"},\n  5,\n]\n", "m.toml"); })
            .starts_with("m.toml:5: layers[1]: must be a table with a 'type' key"));
  // Errors about the whole model name no line.
  CHECK(error("classes = 3", "classes = 0").starts_with("m.toml: key 'classes' must be a positive integer, got 0"));
  // Through a file, as --model gives it.
  const std::string path = (std::filesystem::temp_directory_path() /
                             ("brigade-builder-line-" + std::to_string(getpid()) + ".toml")).string();
  std::string text = kTiny;
  text.replace(text.find("out = 4"), 7, "out = -4");
  std::ofstream(path) << text;
  const std::string from_file = error_of([&] { model::build(path); });
  std::filesystem::remove(path);
  CHECK(from_file == path + ":9: layers[0] (linear): key 'out' must be a positive integer, got -4");
}

TEST_CASE("layers that are not an array of tables are refused as such, not as missing") {
  std::string text = kTiny;
  text = text.substr(0, text.find("[[layers]]")) + "layers = 5\n";
  CHECK(error_of([&] { model::build_from_toml(text, "m.toml"); }) ==
        "m.toml: key 'layers' must be an array of tables ([[layers]] sections), got 5");
  CHECK(error_of([] { model::build("fashion-mlp", {"layers=\"relu\""}); }) ==
        "fashion-mlp with layers=\"relu\": key 'layers' must be an array of tables ([[layers]] sections), got 'relu'");
  CHECK(error_of([&] { model::build_from_toml(text.substr(0, text.find("layers = 5")), "m.toml"); }) ==
        "m.toml: missing [[layers]] (a Sequential needs at least one layer table)");
  CHECK(error_of([&] { model::build_from_toml(text.substr(0, text.find("layers = 5")) + "layers = []\n", "m.toml"); }) ==
        "m.toml: missing [[layers]] (a Sequential needs at least one layer table)");
}

TEST_CASE("a model path that is a directory or cannot be read is refused with the reason") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("brigade-builder-dir-" + std::to_string(getpid()) + ".toml");
  std::filesystem::create_directories(dir);
  const std::string is_dir = error_of([&] { model::build(dir.string()); });
  std::filesystem::remove(dir);
  CHECK(is_dir == dir.string() + ": is a directory, not a model file");
  CHECK(error_of([] { model::build("no/such/model.toml"); }) ==
        "no/such/model.toml: cannot read the model file (No such file or directory)");
  CHECK(error_of([] { model::build("no/such/model.toml", {"n_layer=2"}); }) ==
        "no/such/model.toml: cannot read the model file (No such file or directory)");
}

}  // namespace model_builder_test
