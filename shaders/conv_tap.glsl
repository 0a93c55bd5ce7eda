// Element (ih, iw) of a plane of x, zero in the padding, for the kernels that gather a
// convolution's input patches (conv2d_im2col, conv2d_winograd_input). Include after
// conv_geometry.glsl, x and xw (x as floats and as words) and FORMAT_X (shaders/formats.glsl).
// The load always happens, at a clamped address, and the padding is selected afterwards: a
// CPU driver runs a load under a condition that differs between lanes with the lanes masked,
// which costs more than the wasted load.
float tap(uint plane, int ih, int iw) {
  const bool inside = ih >= 0 && ih < int(H) && iw >= 0 && iw < int(W);
  const uint i = plane + uint(clamp(ih, 0, int(H) - 1)) * W + uint(clamp(iw, 0, int(W) - 1));
  const float v = FORMAT_X == BRIGADE_FORMAT_FP32 ? x[i] : half_in(xw[i >> 1], i, FORMAT_X);
  return inside ? v : 0.0;
}
