// ReLU as PyTorch computes it, x < 0 ? 0 : x, so a NaN passes through (and -0.0 stays -0.0),
// decided on the bits: a compiler may turn the float select into a max() that drops a NaN
// operand, integer tests it may not. (On an NVIDIA H200 a NaN weight left the loss finite,
// which such a max() in the ReLU would explain; not confirmed there.)
// Below zero: the sign bit set, the rest neither zero (-0.0) nor past infinity's bits (NaN).
float relu(float x) {
  const uint b = floatBitsToUint(x);
  return b > 0x80000000u && b <= 0xff800000u ? 0.0 : x;
}
vec4 relu(vec4 x) { return vec4(relu(x.x), relu(x.y), relu(x.z), relu(x.w)); }
