// Shared by the MaxPool2d kernels: the window size and stride as specialization constants
// (constant loops unroll, divisions by S become shifts), and the argmax of one window so
// forward and backward pick the same element. Include after declaring the input as floats,
// pairs, quads, words and pairs of words (x, x2, x4, xw, xw2) and `p` (MaxPool2dPush).
layout(constant_id = 0) const uint K = 2;
layout(constant_id = 1) const uint S = 2;
// K = S = 2 over even H and W, the views 8-byte aligned (the launcher proves it): a window is
// two aligned pairs, and the windows tile the input.
layout(constant_id = 2) const bool PAIRS = false;
// PAIRS, and besides W % 4 == 0 with OW even and the views 16-byte aligned: two neighbouring
// windows of a row are two aligned quads, so one invocation takes both (x, y and z of the
// grid: the pair of windows, the row of windows, the plane).
layout(constant_id = 6) const bool QUADS = false;
// A ReLU folded in before the pooling (ops/maxpool2d.h): windows see relu(x), NaN passing.
layout(constant_id = 3) const bool RELU = false;
#include "relu.glsl"
#include "formats.glsl"
// How x is stored (shaders/formats.glsl).
BRIGADE_FORMAT(4, FORMAT_X);
float x_at(uint i) {
  if (FORMAT_X == BRIGADE_FORMAT_FP32) return x[i];
  return half_in(xw[i >> 1], i, FORMAT_X);
}
// Elements i and i + 1, i even.
vec2 x_pair(uint i) {
  if (FORMAT_X == BRIGADE_FORMAT_FP32) return x2[i >> 1];
  return pair_in(xw[i >> 1], FORMAT_X);
}
// Elements i to i + 3, i a multiple of 4.
vec4 x_quad(uint i) {
  if (FORMAT_X == BRIGADE_FORMAT_FP32) return x4[i >> 2];
  return quad_in(xw2[i >> 2], FORMAT_X);
}
float seen(float v) { return RELU ? relu(v) : v; }
// Whether the gradient reaches the argmax, whose value (as seen) is `top`: past a ReLU only
// where it is positive, as the ReLU's backward would mask it.
bool passes(float top) { return !RELU || top > 0.0; }

// PyTorch's rule: scan the window in row-major order and take an element when it is greater
// than the maximum so far, or NaN; ties keep the first maximum, a NaN wins (the last one).
uint window_argmax(uint plane, uint oh, uint ow) {
  const uint row0 = (plane * p.h + oh * S) * p.w + ow * S;
  uint best = row0;
  float top = seen(x_at(best));
  for (uint r = 0; r < K; ++r)
    for (uint c = 0; c < K; ++c) {
      const uint at = row0 + r * p.w + c;
      const float v = seen(x_at(at));
      if (v > top || isnan(v)) {
        top = v;
        best = at;
      }
    }
  return best;
}

// The same rule with PAIRS: the window of rows r0 and r1 (read as two vec2 loads: on CPU
// devices each load whose address differs between lanes costs a loop over the lanes, 2
// instead of 5; with QUADS, two windows' rows as two vec4 loads). Returns the argmax's place
// in the window, 0 to 3 in row-major order, and its value.
uint pair_argmax(vec2 r0, vec2 r1, out float top) {
  const float v[4] = float[4](seen(r0.x), seen(r0.y), seen(r1.x), seen(r1.y));
  uint best = 0;
  top = v[0];
  for (uint c = 1; c < 4; ++c)
    if (v[c] > top || isnan(v[c])) {
      top = v[c];
      best = c;
    }
  return best;
}
