// GELU with PyTorch's tanh approximation (approximate='tanh'):
//   gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
const float GELU_BETA = 0.7978845608028654;  // sqrt(2 / pi)
const float GELU_KAPPA = 0.044715;

// tanh from exp(-2|u|), which cannot overflow: the driver's tanh may compute
// (e^2u - 1) / (e^2u + 1) and return inf/inf = NaN for large |u|.
float stable_tanh(float u) {
  const float e = exp(-2.0 * abs(u));
  return sign(u) * (1.0 - e) / (1.0 + e);
}
