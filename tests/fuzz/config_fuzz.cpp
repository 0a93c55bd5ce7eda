// libFuzzer harness for the TOML model builder: the input is a model file, optionally
// followed by a line "%%" and one "key=value" override per line. The model is built, its
// parameters and costs are listed, and the config it records is built again, which must give
// the same parameters (checkpoints rebuild their model from it). A refusal must be one clear
// UserError line naming the file or the override.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "model/model.h"

using namespace brigade;

namespace {

constexpr const char* kSource = "fuzz.toml";
constexpr uint64_t kMaxElements = UINT32_MAX;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "broken promise: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  if (const size_t split = text.find("\n%%\n"); split != std::string::npos) {
    std::string rest = text.substr(split + 4);
    text.resize(split + 1);
    for (size_t start = 0; start < rest.size();) {
      const size_t end = std::min(rest.find('\n', start), rest.size());
      overrides.push_back(rest.substr(start, end - start));
      start = end + 1;
    }
  }
  model::Model m;
  if (!fuzz::attempt([&] { m = model::build_from_toml(text, kSource, overrides); },
                     {kSource, "override '"}))
    return 0;
  // What model.h promises of a built model: shapes that chain from the input to `classes`
  // logits per target, views that keep their size, no empty parameter, and every tensor
  // within the kernels' 32-bit indexing.
  const std::vector<model::ParamSpec> params = m.params();
  m.parameter_count();
  check(!m.layers.empty() && m.classes > 0 && m.targets_per_sample > 0, "a model has layers and classes");
  check(m.layers.front()->input_shape() == m.input, "the first layer takes the model's input");
  check(model::elements(m.layers.back()->output_shape()) == uint64_t(m.classes) * m.targets_per_sample,
        "the last layer gives classes logits per target");
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const model::Layer& layer = *m.layers[i];
    if (i > 0) check(layer.input_shape() == m.layers[i - 1]->output_shape(), "the shapes chain");
    const uint64_t in = model::elements(layer.input_shape()), out = model::elements(layer.output_shape());
    check(in > 0 && in <= kMaxElements && out > 0 && out <= kMaxElements, "activations fit 32-bit indexing");
    if (layer.is_view()) check(in == out, "a view keeps the number of elements");
    for (const model::SavedSpec& s : layer.saved())
      check(s.per_sample <= kMaxElements && s.fixed <= kMaxElements, "saved tensors fit 32-bit indexing");
    layer.cost();
    layer.scratch_floats(1, ops::Precision::Fp32);
  }
  for (const model::ParamSpec& p : params) {
    for (int64_t d : p.shape) check(d > 0, "parameters have no empty dimension");
    check(p.elements() <= kMaxElements, "parameters fit 32-bit indexing");
  }
  model::Model again;
  try {
    again = model::build_from_toml(m.config, "fuzz.toml (config)");
  } catch (const UserError& e) {
    std::fprintf(stderr, "the recorded config does not build again: %s\n", e.what());
    std::abort();
  }
  const std::vector<model::ParamSpec> params_again = again.params();
  check(params.size() == params_again.size(), "the rebuilt model has as many parameters");
  for (size_t i = 0; i < params.size(); ++i)
    check(params[i].name == params_again[i].name && params[i].shape == params_again[i].shape,
          "the rebuilt model has the same parameters");
  return 0;
}
