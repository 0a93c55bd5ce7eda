#version 450
// Conv2d, ReLU and a 2x2 max pooling at stride 2 in one pass (ops/conv2d_pool.h):
//   x (N, IC, H, W)  weight (OC, IC, KH, KW)  bias (OC)  ->  y (N, OC, OH / 2, OW / 2)
//   y = max over each window of relu(conv(x) + bias), by PyTorch's rule (the first maximum
//   in row-major order, a NaN wins), and `codes`: which element of each window the gradient
//   goes to (0 to 3, row-major), or 4 where none does (the maximum not positive).
// One invocation per two neighbouring pooled outputs of a row (a pair), every output channel:
// it loads its input patch once into registers and computes the pair's 2 x 4 convolution
// outputs for each channel. IC, OC and the geometry are specialization constants, so the
// channel and tap loops unroll and every weight load has a constant offset (a CPU driver
// loads it once for all lanes).
//   codes: one byte per (pair, channel), the even output's code in its low four bits: word
//   ((n * POH + py) * PAIRS + pair) * OC / 4 + oc / 4, byte oc % 4.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "conv.h"
#include "formats.glsl"
#include "relu.glsl"
#include "pooling.glsl"

layout(local_size_x = BRIGADE_WG_CONV) in;
#include "conv_geometry.glsl"
layout(constant_id = 13) const bool HAS_BIAS = true;
BRIGADE_FORMAT(14, FORMAT_X);
BRIGADE_FORMAT(15, FORMAT_Y);

layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 0) readonly buffer XW { uint xw[]; };
layout(binding = 1) readonly buffer Wt { float w[]; };
layout(binding = 2) readonly buffer Bias { float bias[]; };
layout(binding = 3) writeonly buffer Y2 { vec2 y2[]; };
layout(binding = 3) writeonly buffer YW { uint yw[]; };
layout(binding = 4) writeonly buffer Codes { uint codes[]; };
layout(push_constant) uniform Push { Conv2dPush p; };
#include "conv_tap.glsl"
#include "pool_patch.glsl"

void main() {
  const uint i = gl_GlobalInvocationID.x, n = gl_WorkGroupID.z;
  if (i >= POH * PAIRS) return;
  const uint py = i / PAIRS, pair = i % PAIRS;
  float under[PATCH];
  load_patch(n, py, pair, under);
  uint word = 0u;
  [[unroll]] for (uint oc = 0u; oc < OC; ++oc) {
    float out_[8];  // convolution rows 0 and 1, columns 0 to 3
    [[unroll]] for (uint j = 0u; j < 8u; ++j) out_[j] = 0.0;
    [[unroll]] for (uint c = 0u; c < IC; ++c)
      [[unroll]] for (uint kh = 0u; kh < KH; ++kh)
        [[unroll]] for (uint kw = 0u; kw < KW; ++kw) {
          const float wv = w[((oc * IC + c) * KH + kh) * KW + kw];
          [[unroll]] for (uint r = 0u; r < 2u; ++r)
            [[unroll]] for (uint col = 0u; col < 4u; ++col)
              out_[r * 4u + col] += wv * under[(c * PATCH_H + r * SH + kh) * PATCH_W + col * SW + kw];
        }
    const float b = HAS_BIAS ? bias[oc] : 0.0;
    uint lo, hi;
    const float even = pooled(vec4(out_[0], out_[1], out_[4], out_[5]) + b, lo);
    const float odd = pooled(vec4(out_[2], out_[3], out_[6], out_[7]) + b, hi);
    const uint at = ((n * OC + oc) * POH + py) * POW + 2u * pair;  // even: a pair is one vec2, one word
    if (FORMAT_Y == BRIGADE_FORMAT_FP32) y2[at >> 1] = vec2(even, odd);
    else yw[at >> 1] = pair_out(even, odd, FORMAT_Y);
    word |= (lo | (hi << 4u)) << (8u * (oc % 4u));
    if (oc % 4u == 3u) {
      codes[code_word(n, py, pair, oc)] = word;
      word = 0u;
    }
  }
}
