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

float gelu(float v) { return 0.5 * v * (1.0 + stable_tanh(GELU_BETA * (v + GELU_KAPPA * v * v * v))); }

// d gelu(v) / dv
float gelu_grad(float v) {
  const float v2 = v * v;
  const float t = stable_tanh(GELU_BETA * (v + GELU_KAPPA * v2 * v));
  const float du = GELU_BETA * (1.0 + 3.0 * GELU_KAPPA * v2);
  return 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * du;
}

// Four at a time, each component as above.
vec4 gelu(vec4 v) { return vec4(gelu(v.x), gelu(v.y), gelu(v.z), gelu(v.w)); }
vec4 gelu_grad(vec4 v) { return vec4(gelu_grad(v.x), gelu_grad(v.y), gelu_grad(v.z), gelu_grad(v.w)); }
