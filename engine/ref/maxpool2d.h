// CPU reference of MaxPool2d (engine/ops/maxpool2d.h): plain loops in the same argument
// order as the launchers, templated on the scalar so the gradient checks can run in double.
//   x (N, C, H, W)  y (N, C, OH, OW)
#pragma once

#include <cmath>
#include <cstddef>
#include <span>

#include "ops/maxpool2d.h"

namespace brigade::ref {

// What the window sees of x[i]: relu(x[i]) with s.relu (NaN passing), else x[i].
template <class T>
T maxpool2d_seen(std::span<const T> x, const ops::MaxPool2dShape& s, size_t i) {
  return s.relu && x[i] < T(0) ? T(0) : x[i];
}

// Index into x of the maximum of window (plane, oh, ow), as PyTorch picks it: row-major
// scan, strictly greater or NaN replaces, so ties keep the first maximum.
template <class T>
size_t maxpool2d_argmax(std::span<const T> x, const ops::MaxPool2dShape& s, size_t plane,
                        uint32_t oh, uint32_t ow) {
  const size_t row0 = (plane * s.h + size_t(oh) * s.s) * s.w + size_t(ow) * s.s;
  size_t best = row0;
  T top = maxpool2d_seen(x, s, row0);
  for (uint32_t r = 0; r < s.k; ++r)
    for (uint32_t c = 0; c < s.k; ++c) {
      const size_t at = row0 + size_t(r) * s.w + c;
      const T v = maxpool2d_seen(x, s, at);
      if (v > top || std::isnan(v)) best = at, top = v;
    }
  return best;
}

template <class T>
void maxpool2d_forward(std::span<const T> x, std::span<T> y, const ops::MaxPool2dShape& s) {
  size_t i = 0;
  for (size_t plane = 0; plane < size_t(s.n) * s.c; ++plane)
    for (uint32_t oh = 0; oh < s.out_h(); ++oh)
      for (uint32_t ow = 0; ow < s.out_w(); ++ow)
        y[i++] = maxpool2d_seen(x, s, maxpool2d_argmax(x, s, plane, oh, ow));
}

// dx = dloss/dx.
template <class T>
void maxpool2d_backward_data(std::span<const T> x, std::span<const T> dy, std::span<T> dx,
                             const ops::MaxPool2dShape& s) {
  for (T& v : dx) v = T(0);
  size_t i = 0;
  for (size_t plane = 0; plane < size_t(s.n) * s.c; ++plane)
    for (uint32_t oh = 0; oh < s.out_h(); ++oh)
      for (uint32_t ow = 0; ow < s.out_w(); ++ow, ++i) {
        const size_t at = maxpool2d_argmax(x, s, plane, oh, ow);
        if (!s.relu || maxpool2d_seen(x, s, at) > T(0)) dx[at] += dy[i];  // past a ReLU: where positive
      }
}

}  // namespace brigade::ref
