// The 2x2 max pooling of a Conv2d that takes its ReLU and pooling (ops/conv2d_pool.h), shared
// by the kernels that pool: of a window's four values (row-major), the one PyTorch's max
// pooling picks, seen through the ReLU, and its code: where it is (0 to 3), or 4 where the
// gradient stops (the maximum not positive, or NaN). Include after relu.glsl.
#ifndef BRIGADE_SHADERS_POOLING_GLSL
#define BRIGADE_SHADERS_POOLING_GLSL

float pooled(vec4 v, out uint code) {
  uint best = 0u;
  float top = relu(v[0]);
  for (uint c = 1u; c < 4u; ++c) {
    const float s = relu(v[c]);
    if (s > top || isnan(s)) {
      top = s;
      best = c;
    }
  }
  code = top > 0.0 ? best : 4u;
  return top;
}

#endif
