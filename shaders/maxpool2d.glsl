// Shared by the MaxPool2d kernels: the window size and stride as specialization constants
// (constant loops unroll, divisions by S become shifts), and the argmax of one window so
// forward and backward pick the same element. Include after declaring `x` (the input) and
// `p` (MaxPool2dPush).
layout(constant_id = 0) const uint K = 2;
layout(constant_id = 1) const uint S = 2;

// PyTorch's rule: scan the window in row-major order and take an element when it is greater
// than the maximum so far, or NaN; ties keep the first maximum, a NaN wins (the last one).
uint window_argmax(uint plane, uint oh, uint ow) {
  const uint row0 = (plane * p.h + oh * S) * p.w + ow * S;
  uint best = row0;
  float top = x[best];
  for (uint r = 0; r < K; ++r)
    for (uint c = 0; c < K; ++c) {
      const uint at = row0 + r * p.w + c;
      const float v = x[at];
      if (v > top || isnan(v)) {
        top = v;
        best = at;
      }
    }
  return best;
}
