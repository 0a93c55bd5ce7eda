#version 450
// The weight and bias gradients of a Conv2d whose ReLU and 2x2 pooling are folded in
// (ops/conv2d_pool.h), straight from the pooled gradient and the forward's codes: each
// pooled output's gradient g meets the input patch under the element its code names,
//   dweight[oc][ic][kh][kw] += sum g * x[ic][at + (kh, kw)],  dbias[oc] += sum g,
// so the convolution's output gradient, three quarters zeros, is never written.
// One invocation per column of output pairs of one sample and OCB channels (y of the grid):
// it walks the pooled rows, loading each patch once (conv2d_pool_forward's), and keeps the
// OCB channels' sums in registers. It writes them as its row of partial sums of the weights
// and of the biases; the launcher sums the rows down each column in order
// (linear_bias_backward), so the result is the same bits on every run.
//   dy (N, OC, OH / 2, OW / 2)  partial_w (N * PAIRS, OC * IC * KH * KW)  partial_b (N * PAIRS, OC)
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "conv.h"
#include "formats.glsl"

layout(local_size_x = BRIGADE_WG_CONV) in;
#include "conv_geometry.glsl"
layout(constant_id = 13) const uint OCB = 4;  // divides OC
BRIGADE_FORMAT(14, FORMAT_X);

layout(binding = 0) readonly buffer DY2 { vec2 dy2[]; };
layout(binding = 1) readonly buffer Codes { uint codes[]; };
layout(binding = 2) readonly buffer X { float x[]; };
layout(binding = 2) readonly buffer XW { uint xw[]; };
layout(binding = 3) writeonly buffer PartialW { float partial_w[]; };
layout(binding = 4) writeonly buffer PartialB { float partial_b[]; };
layout(push_constant) uniform Push { Conv2dPush p; };
#include "conv_tap.glsl"
#include "pool_patch.glsl"

const uint TAPS = IC * KH * KW;

void main() {
  const uint i = gl_GlobalInvocationID.x, oc0 = gl_WorkGroupID.y * OCB;
  if (i >= p.n * PAIRS) return;
  const uint n = i / PAIRS, pair = i % PAIRS;
  float dw[OCB * TAPS], db[OCB];
  [[unroll]] for (uint j = 0u; j < OCB * TAPS; ++j) dw[j] = 0.0;
  [[unroll]] for (uint o = 0u; o < OCB; ++o) db[o] = 0.0;
  for (uint py = 0u; py < POH; ++py) {
    float under[PATCH];
    load_patch(n, py, pair, under);
    const uint code_at = code_word(n, py, pair, oc0);
    [[unroll]] for (uint o = 0u; o < OCB; ++o) {
      const uint code = (codes[code_at + o / 4u] >> (8u * (o % 4u))) & 0xFFu;
      const vec2 g = dy2[(((n * OC + oc0 + o) * POH + py) * POW + 2u * pair) >> 1];
      [[unroll]] for (uint half_ = 0u; half_ < 2u; ++half_) {  // the pair's two windows
        const uint c = half_ == 0u ? code & 0xFu : code >> 4u;
        const float v = c < 4u ? (half_ == 0u ? g.x : g.y) : 0.0;
        const uint r = c >> 1u;  // the element's row in the window (when c < 4)
        db[o] += v;
        [[unroll]] for (uint ic = 0u; ic < IC; ++ic)
          [[unroll]] for (uint kh = 0u; kh < KH; ++kh)
            [[unroll]] for (uint kw = 0u; kw < KW; ++kw) {
              // The tap under each of the window's four elements, picked by selects: an index
              // that differs between lanes would send a CPU driver's registers to memory.
              const uint row0 = ic * PATCH_H + kh, at0 = 2u * half_ * SW + kw;
              const float t00 = under[row0 * PATCH_W + at0], t01 = under[row0 * PATCH_W + at0 + SW];
              const float t10 = under[(row0 + SH) * PATCH_W + at0], t11 = under[(row0 + SH) * PATCH_W + at0 + SW];
              const float t = r == 0u ? ((c & 1u) == 0u ? t00 : t01) : ((c & 1u) == 0u ? t10 : t11);
              dw[o * TAPS + (ic * KH + kh) * KW + kw] += v * t;
            }
      }
    }
  }
  [[unroll]] for (uint o = 0u; o < OCB; ++o) {
    [[unroll]] for (uint j = 0u; j < TAPS; ++j) partial_w[(i * OC + oc0 + o) * TAPS + j] = dw[o * TAPS + j];
    partial_b[i * OC + oc0 + o] = db[o];
  }
}
