// Initial parameter values (engine/model/model.h): a counter-based generator, so each
// element is a pure function of (seed, parameter name, element index) and the same seed
// gives the same model on every machine, whatever order parameters are initialized in.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "model/model.h"

namespace brigade::model {
namespace {

// SplitMix64's finalizer: a bijective mix of 64 bits.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// FNV-1a of the name, mixed with the seed: the key of one parameter's stream.
uint64_t stream_key(uint64_t seed, const std::string& name) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001B3ull;
  return mix(mix(seed + 0x9E3779B97F4A7C15ull) ^ h);
}

// The i-th draw of a stream, uniform in [0, 1) with 53 bits.
double uniform01(uint64_t key, uint64_t i) {
  return double(mix(key + 0x9E3779B97F4A7C15ull * (i + 1)) >> 11) * 0x1.0p-53;
}

}  // namespace

std::vector<float> initial_values(const ParamSpec& spec, uint64_t seed) {
  std::vector<float> v(spec.elements());
  const uint64_t key = stream_key(seed, spec.name);
  switch (spec.init) {
    case Init::Zeros:
      break;
    case Init::Ones:
      std::fill(v.begin(), v.end(), 1.0f);
      break;
    case Init::Uniform:
      for (uint64_t i = 0; i < v.size(); ++i) {
        const float x = float(spec.scale * (2 * uniform01(key, i) - 1));
        v[i] = x < spec.scale ? x : std::nextafter(spec.scale, 0.0f);  // rounding may reach it
      }
      break;
    case Init::Normal:
      // Box-Muller on draws 2i and 2i + 1; 1 - u keeps the logarithm's argument in (0, 1].
      for (uint64_t i = 0; i < v.size(); ++i) {
        const double r = std::sqrt(-2 * std::log(1 - uniform01(key, 2 * i)));
        v[i] = float(spec.scale * r * std::cos(2 * std::numbers::pi * uniform01(key, 2 * i + 1)));
      }
      break;
  }
  return v;
}

}  // namespace brigade::model
