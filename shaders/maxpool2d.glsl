// The argmax of one MaxPool2d window, shared by forward and backward so both pick the same
// element. Include after declaring `x` (the input) and `p` (MaxPool2dPush).
//
// PyTorch's rule: scan the window in row-major order and take an element when it is greater
// than the maximum so far, or NaN; ties keep the first maximum, a NaN wins (the last one).
uint window_argmax(uint plane, uint oh, uint ow) {
  const uint row0 = (plane * p.h + oh * p.s) * p.w + ow * p.s;
  uint best = row0;
  float top = x[best];
  for (uint r = 0; r < p.k; ++r)
    for (uint c = 0; c < p.k; ++c) {
      const uint at = row0 + r * p.w + c;
      const float v = x[at];
      if (v > top || isnan(v)) {
        top = v;
        best = at;
      }
    }
  return best;
}
