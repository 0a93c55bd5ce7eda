// CPU reference of the token + position embedding (engine/ops/embedding.h): plain loops in
// the same argument order as the launchers, templated on the scalar so the gradient checks
// can run in double.
//   tokens (B, T) int32  wte (V, C)  wpe (block_size, C)  out (B, T, C)
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

namespace brigade::ref {

// Tokens outside [0, V) are clamped into it, as the kernels do.
inline size_t embedding_row(int32_t token, uint32_t V) {
  return size_t(std::clamp<int64_t>(token, 0, int64_t(V) - 1));
}

template <class F>
void embedding_forward(std::span<const int32_t> tokens, std::span<const F> wte,
                       std::span<const F> wpe, std::span<F> out, uint32_t B, uint32_t T,
                       uint32_t C, uint32_t V) {
  for (size_t b = 0; b < B; ++b)
    for (size_t t = 0; t < T; ++t) {
      const size_t row = embedding_row(tokens[b * T + t], V);
      for (size_t c = 0; c < C; ++c) out[(b * T + t) * C + c] = wte[row * C + c] + wpe[t * C + c];
    }
}

// dwte += dloss/dwte, dwpe += dloss/dwpe.
template <class F>
void embedding_backward(std::span<const F> dout, std::span<const int32_t> tokens,
                        std::span<F> dwte, std::span<F> dwpe, uint32_t B, uint32_t T, uint32_t C,
                        uint32_t V) {
  for (size_t b = 0; b < B; ++b)
    for (size_t t = 0; t < T; ++t) {
      const size_t row = embedding_row(tokens[b * T + t], V);
      for (size_t c = 0; c < C; ++c) {
        dwte[row * C + c] += dout[(b * T + t) * C + c];
        dwpe[t * C + c] += dout[(b * T + t) * C + c];
      }
    }
}

}  // namespace brigade::ref
