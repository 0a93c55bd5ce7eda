// Helpers of the tests of kernels that read and write 16-bit tensors themselves: values as a
// format keeps them, packed on the host as the kernels store them, and a bit-for-bit check.
#pragma once

#include <bit>
#include <cmath>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "ops/matmul.h"
#include "ops/precision.h"
#include "shaders/precision.h"

namespace brigade::test {

// Tilings the 16-bit matrix tests force on any device: CPU register blocks, with and without
// A shared by subgroups, and the GPU's shared-memory tiles.
inline const ops::MatmulTiling kSubgroupRegisters{ops::MatmulTiling::Variant::Registers, 8, 8, 32, 4, 16, 8};
inline const ops::MatmulTiling kRegisters{ops::MatmulTiling::Variant::Registers, 8, 8, 8, 8, 16, 0};
inline const ops::MatmulTiling kShared{ops::MatmulTiling::Variant::Shared, 16, 16, 4, 4, 16, 0};

inline std::vector<float> rounded(std::vector<float> v, ops::Precision p) {
  for (float& x : v) x = ops::round_on_host(x, p);
  return v;
}

// Host packing, two values to a word (element 2i in the low half), as words held in floats
// so the test helpers upload and download them.
inline std::vector<float> packed(const std::vector<float>& v, ops::Precision p) {
  std::vector<float> words((v.size() + 1) / 2, 0.0f);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint32_t h = shaders::half_from_bits(std::bit_cast<uint32_t>(v[i]), uint32_t(p));
    words[i / 2] = std::bit_cast<float>(std::bit_cast<uint32_t>(words[i / 2]) | (h << (i % 2 ? 16 : 0)));
  }
  return words;
}

// The first n values of a packed tensor (the inverse of `packed`).
inline std::vector<float> unpacked(const std::vector<float>& words, ops::Precision p, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t h = (std::bit_cast<uint32_t>(words[i / 2]) >> (i % 2 ? 16 : 0)) & 0xFFFFu;
    v[i] = std::bit_cast<float>(shaders::bits_from_half(h, uint32_t(p)));
  }
  return v;
}

inline void check_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  REQUIRE(got.size() >= want.size());
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i]) && !(std::isnan(got[i]) && std::isnan(want[i])))
      if (wrong++ == 0) first = i;
  CHECK_MESSAGE(wrong == 0, what, ": ", wrong, " of ", want.size(), " words differ, the first at ", first, " (",
                std::bit_cast<uint32_t>(got[first]), " against ", std::bit_cast<uint32_t>(want[first]), ")");
}

}  // namespace brigade::test
