// CPU reference of Conv2d (engine/ops/conv2d.h): plain loops in the same argument order as
// the launchers, templated on the scalar so the gradient checks can run in double.
//   x (N, IC, H, W)  weight (OC, IC, KH, KW)  bias (OC)  y (N, OC, OH, OW)
#pragma once

#include <span>

#include "ops/conv2d.h"

namespace brigade::ref {

// Calls f(n, oc, ic, oh, ow, kh, kw, ih, iw) for every tap that reads the input (padding
// taps read zeros and contribute nothing).
template <class F>
void conv2d_for_each_tap(const ops::Conv2dShape& s, F&& f) {
  const uint32_t oh_n = s.out_h(), ow_n = s.out_w();
  for (uint32_t n = 0; n < s.n; ++n)
    for (uint32_t oc = 0; oc < s.oc; ++oc)
      for (uint32_t ic = 0; ic < s.ic; ++ic)
        for (uint32_t oh = 0; oh < oh_n; ++oh)
          for (uint32_t ow = 0; ow < ow_n; ++ow)
            for (uint32_t kh = 0; kh < s.kh; ++kh)
              for (uint32_t kw = 0; kw < s.kw; ++kw) {
                const int64_t ih = int64_t(oh) * s.stride_h - s.pad_h + kh;
                const int64_t iw = int64_t(ow) * s.stride_w - s.pad_w + kw;
                if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
                f(n, oc, ic, oh, ow, kh, kw, uint32_t(ih), uint32_t(iw));
              }
}

namespace conv2d_detail {
inline size_t x_at(const ops::Conv2dShape& s, uint32_t n, uint32_t ic, uint32_t ih, uint32_t iw) {
  return ((size_t(n) * s.ic + ic) * s.h + ih) * s.w + iw;
}
inline size_t w_at(const ops::Conv2dShape& s, uint32_t oc, uint32_t ic, uint32_t kh, uint32_t kw) {
  return ((size_t(oc) * s.ic + ic) * s.kh + kh) * s.kw + kw;
}
inline size_t y_at(const ops::Conv2dShape& s, uint32_t n, uint32_t oc, uint32_t oh, uint32_t ow) {
  return ((size_t(n) * s.oc + oc) * s.out_h() + oh) * s.out_w() + ow;
}
}  // namespace conv2d_detail

// y = conv(x, weight) + bias; an empty bias means none.
template <class T>
void conv2d_forward(std::span<const T> x, std::span<const T> weight, std::span<const T> bias,
                    std::span<T> y, const ops::Conv2dShape& s) {
  using namespace conv2d_detail;
  for (uint32_t n = 0; n < s.n; ++n)
    for (uint32_t oc = 0; oc < s.oc; ++oc)
      for (uint32_t oh = 0; oh < s.out_h(); ++oh)
        for (uint32_t ow = 0; ow < s.out_w(); ++ow)
          y[y_at(s, n, oc, oh, ow)] = bias.empty() ? T(0) : bias[oc];
  conv2d_for_each_tap(s, [&](uint32_t n, uint32_t oc, uint32_t ic, uint32_t oh, uint32_t ow,
                             uint32_t kh, uint32_t kw, uint32_t ih, uint32_t iw) {
    y[y_at(s, n, oc, oh, ow)] += weight[w_at(s, oc, ic, kh, kw)] * x[x_at(s, n, ic, ih, iw)];
  });
}

// dx += dloss/dx.
template <class T>
void conv2d_backward_data(std::span<const T> dy, std::span<const T> weight, std::span<T> dx,
                          const ops::Conv2dShape& s) {
  using namespace conv2d_detail;
  conv2d_for_each_tap(s, [&](uint32_t n, uint32_t oc, uint32_t ic, uint32_t oh, uint32_t ow,
                             uint32_t kh, uint32_t kw, uint32_t ih, uint32_t iw) {
    dx[x_at(s, n, ic, ih, iw)] += weight[w_at(s, oc, ic, kh, kw)] * dy[y_at(s, n, oc, oh, ow)];
  });
}

// dweight += dloss/dweight; dbias += dloss/dbias unless dbias is empty.
template <class T>
void conv2d_backward_weight(std::span<const T> dy, std::span<const T> x, std::span<T> dweight,
                            std::span<T> dbias, const ops::Conv2dShape& s) {
  using namespace conv2d_detail;
  conv2d_for_each_tap(s, [&](uint32_t n, uint32_t oc, uint32_t ic, uint32_t oh, uint32_t ow,
                             uint32_t kh, uint32_t kw, uint32_t ih, uint32_t iw) {
    dweight[w_at(s, oc, ic, kh, kw)] += dy[y_at(s, n, oc, oh, ow)] * x[x_at(s, n, ic, ih, iw)];
  });
  if (dbias.empty()) return;
  for (uint32_t n = 0; n < s.n; ++n)
    for (uint32_t oc = 0; oc < s.oc; ++oc)
      for (uint32_t oh = 0; oh < s.out_h(); ++oh)
        for (uint32_t ow = 0; ow < s.out_w(); ++ow) dbias[oc] += dy[y_at(s, n, oc, oh, ow)];
}

}  // namespace brigade::ref
