// Push-constant structs and workgroup sizes, shared by the GLSL kernels and their C++
// launchers so each is defined once. Plain 32-bit scalars only: std430 push-constant layout
// and C++ layout then agree.
#ifndef BRIGADE_SHADERS_PUSH_H
#define BRIGADE_SHADERS_PUSH_H

#ifdef __cplusplus
#include <cstdint>
namespace brigade::shaders {
using uint = std::uint32_t;
#endif

// Threads per workgroup of element-wise (1-D) kernels.
#define BRIGADE_WG_1D 256

// axpy: y[i] += alpha * x[i], or, with terms > 1, y[i] += alpha * x[t * stride + i] for
// t = 0 .. terms - 1 in order (the same bits as one axpy per term). terms 0 means 1, so
// AxpyPush{n, alpha} is a plain axpy.
struct AxpyPush {
  uint n;
  float alpha;
  uint terms;
  uint stride;
};

#ifdef __cplusplus
}  // namespace brigade::shaders
#endif
#endif
