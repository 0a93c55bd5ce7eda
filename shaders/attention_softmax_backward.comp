#version 450
// The softmax's backward, one row i of one head per invocation, given the recomputed scaled
// scores S and dP = dY V^T:
//   P_ij  = exp(S_ij - lse_i)             written over S (dV = P^T dY reads it)
//   dS_ij = P_ij (dP_ij - delta_i)        written over dP (dQ and dK read it; their matmuls
//                                         apply the 1/sqrt(HS) of the scores)
//   delta_i = sum_j P_ij dP_ij = dy_i . y_i   (the row of y the forward produced)
// both exactly 0 for j > i: the matmuls that follow read whole rows. With VEC4 and a 16-bit
// FORMAT_P, both go packed to their own bindings instead (attention.h).
//   scores, dscores (B,NH,T,T); lse (B,NH,T); dy, y (B,T,C)
#extension GL_GOOGLE_include_directive : require
#include "attention.h"
#include "formats.glsl"

layout(local_size_x = BRIGADE_WG_ATTENTION_ROWS) in;

// VEC4 (T and HS multiples of 4, every view 16-byte aligned): four keys, and four channels
// of delta, at a time.
layout(constant_id = BRIGADE_ATTENTION_SPEC_VEC4) const bool VEC4 = false;

layout(binding = 0) buffer Scores { float s[]; };
layout(binding = 0) buffer Scores4 { vec4 s4[]; };
layout(binding = 1) buffer Dscores { float ds[]; };
layout(binding = 1) buffer Dscores4 { vec4 ds4[]; };
layout(binding = 2) readonly buffer Lse { float lse[]; };
layout(binding = 3) readonly buffer Dy { float dy[]; };
layout(binding = 3) readonly buffer Dy4 { vec4 dy4[]; };
layout(binding = 4) readonly buffer Y { float y[]; };
layout(binding = 4) readonly buffer Y4 { vec4 y4[]; };
layout(binding = 4) readonly buffer YW { uint yw[]; };
layout(binding = 4) readonly buffer YW2 { uvec2 yw2[]; };
// P and dS packed (FORMAT_P 16-bit, VEC4 only), laid out as the scores; otherwise bound to
// anything.
layout(binding = 5) writeonly buffer PackedP { uvec2 pw2[]; };
layout(binding = 6) writeonly buffer PackedDs { uvec2 dsw2[]; };
layout(push_constant) uniform Push { AttentionSoftmaxPush p; };
// How y is stored (shaders/formats.glsl), and where P and dS go (attention.h).
BRIGADE_FORMAT(BRIGADE_ATTENTION_SPEC_FORMAT_Y, FORMAT_Y);
BRIGADE_FORMAT(BRIGADE_ATTENTION_SPEC_FORMAT_P, FORMAT_P);

// Quad q of the row's P and dS as the products read them.
void store(uint q, vec4 prob, vec4 grad) {
  if (FORMAT_P == BRIGADE_FORMAT_FP32) s4[q] = prob, ds4[q] = grad;
  else pw2[q] = quad_out(prob, FORMAT_P), dsw2[q] = quad_out(grad, FORMAT_P);
}

float y_at(uint i) {
  if (FORMAT_Y == BRIGADE_FORMAT_FP32) return y[i];
  return half_in(yw[i >> 1], i, FORMAT_Y);
}
vec4 y_quad(uint q) {
  if (FORMAT_Y == BRIGADE_FORMAT_FP32) return y4[q];
  return quad_in(yw2[q], FORMAT_Y);
}

void main() {
  const uint i = gl_GlobalInvocationID.x, bh = gl_WorkGroupID.y;
  if (i >= p.T) return;
  const uint z = p.head + bh, b = z / p.NH, h = z % p.NH, row = (bh * p.T + i) * p.T;
  const uint token = ((p.first + b) * p.T + i) * p.NH * p.HS + h * p.HS;

  const float lse_i = lse[(p.first * p.NH + z) * p.T + i];
  if (VEC4) {
    vec4 dots = vec4(0.0);
    for (uint d = 0; d < p.HS / 4; ++d) dots += dy4[token / 4 + d] * y_quad(token / 4 + d);
    const float delta = (dots.x + dots.y) + (dots.z + dots.w);
    const uint at = row / 4, last = i / 4;  // the quad that holds key i
    for (uint q = 0; q <= last; ++q) {
      const bvec4 in_row = keys_kept(q, i);
      const vec4 prob = mix(vec4(0.0), exp(s4[at + q] - lse_i), in_row);
      store(at + q, prob, prob * (ds4[at + q] - delta));
    }
    for (uint q = last + 1; q < p.T / 4; ++q) store(at + q, vec4(0.0), vec4(0.0));
    return;
  }
  float delta = 0.0;
  for (uint d = 0; d < p.HS; ++d) delta += dy[token + d] * y_at(token + d);
  for (uint j = 0; j <= i; ++j) {
    const float prob = exp(s[row + j] - lse_i);
    s[row + j] = prob;
    ds[row + j] = prob * (ds[row + j] - delta);
  }
  for (uint j = i + 1; j < p.T; ++j) s[row + j] = 0.0, ds[row + j] = 0.0;
}
