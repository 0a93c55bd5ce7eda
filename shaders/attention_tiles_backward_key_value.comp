#version 450
// Causal self-attention backward on matrix units, the keys' and values' pass (after
// attention_tiles_backward_query.comp, which writes delta):
//   dqkv's v part = P^T dY, its k part = scale dS^T Q.
// Tensors as the queries' pass has them. A workgroup takes BR key rows of one head
// (shaders/attention_tiles.glsl) and stages their k and v, then walks the queries in blocks of
// BC from the block that holds its first key to the end, each block loaded into registers
// while the warps multiply the one before (FETCH_*):
//   1. S^T = scale K Q^T and dP^T = V dY^T, each warp its rows, into F and G;
//   2. each lane its runs of eight queries of a key: P^T = exp(S^T - lse) under the causal
//      mask (queries from the key on), dS^T = P^T (dP^T - delta), both rounded to FORMAT into
//      shared memory;
//   3. P^T dY and dS^T Q added to the warp's sums (dV's matrices, then dK's).
// Between the steps a warp waits for itself alone (WARP_SYNC); the workgroup waits for the
// block staged and for every warp done with it.
// At the end each warp's sums pass through its rows of F, and its lanes write them into dqkv,
// the keys' scaled (with COPY packed beside).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#define BRIGADE_FORMATS  // FORMAT is a specialization constant
#include "attention.h"
#include "formats.glsl"

layout(binding = 0) readonly buffer Qkv { uvec4 qkv8[]; };  // eight 16-bit elements each
layout(binding = 1) readonly buffer Lse { float lse[]; };
layout(binding = 2) readonly buffer Dy4 { vec4 dy4[]; };
layout(binding = 3) buffer Dqkv { float dqkv[]; };
layout(binding = 4) readonly buffer Delta { float delta[]; };
layout(binding = 5) writeonly buffer Copy { uint copyw[]; };  // dqkv packed, with COPY
layout(constant_id = BRIGADE_ATTENTION_TILES_SPEC_COPY) const bool COPY = false;
layout(push_constant) uniform Push { AttentionPush p; };
#define ATTENTION_SUMS (2 * HS / LN)  // dV's matrices, then dK's
#define HELD_A (2 * HS / LK)          // the warp's keys, then its values
#include "attention_tiles.glsl"

shared uvec4 Ks[BR * HLD / 8], Vs[BR * HLD / 8], Qs[BC * HLD / 8], Dys[BC * HLD / 8];
shared uvec4 Ps[BR * PLD / 8], Dss[BR * PLD / 8];
shared float Gs[BR * FLD];  // dP^T, beside F's S^T
shared float Ls[BC], Ds[BC];  // the block's queries' lse and delta
// An invocation's share of a block's lse and delta from query r0 on, into lf and df.
const uint STATS = (BC + THREADS - 1) / THREADS;
#define FETCH_STATS(r0)                                                              \
  STAGE_LOOP for (uint i_ = 0; i_ < STATS; ++i_) {                                   \
    const uint j_ = gl_LocalInvocationIndex + i_ * THREADS;                          \
    const bool in_ = j_ < BC && (r0) + j_ < p.T;                                     \
    lf[i_] = in_ ? lse[stats + (r0) + j_] : 0.0, df[i_] = in_ ? delta[stats + (r0) + j_] : 0.0; \
  }

void main() {
  const uint h = gl_WorkGroupID.y, b = p.first + gl_WorkGroupID.z, k0 = gl_WorkGroupID.x * BR;
  const uint warp = tile_warp(), lane = tile_lane(), w0 = warp * LM;
  const uint stats = (b * p.NH + h) * p.T;
  sums_zero();
  STAGE_QKV(Ks, 1, k0, BR);
  STAGE_QKV(Vs, 2, k0, BR);
  barrier();
  HOLD_ROWS(0, Ks, w0);
  HOLD_ROWS(HS / LK, Vs, w0);

  // The next block's queries, dy, lse and delta (an invocation's share).
  uvec4 qf[FETCHES];
  vec4 dyf[2 * FETCHES];
  float lf[STATS], df[STATS];
  FETCH_QKV(qf, 0, k0 / BC * BC);
  FETCH_ROUNDED_ROWS(dyf, dy4, p.C / 4, h * HS / 4, k0 / BC * BC);
  FETCH_STATS(k0 / BC * BC);
  for (uint j0 = k0 / BC * BC; j0 < p.T; j0 += BC) {
    PUT_ROWS(Qs, qf);
    PUT_ROUNDED_ROWS(Dys, dyf);
    STAGE_LOOP for (uint i = 0; i < STATS; ++i) {
      const uint j = gl_LocalInvocationIndex + i * THREADS;
      if (j < BC) Ls[j] = lf[i], Ds[j] = df[i];
    }
    barrier();
    if (j0 + BC < p.T) {
      FETCH_QKV(qf, 0, j0 + BC);
      FETCH_ROUNDED_ROWS(dyf, dy4, p.C / 4, h * HS / 4, j0 + BC);
      FETCH_STATS(j0 + BC);
    }
    // 1. S^T = scale K Q^T, dP^T = V dY^T: the queries' and dy's rows are the columns.
    WARP_PRODUCT(Fs, w0 * FLD, BC, 0, Ks, w0, Qs, 0, HLD, true, p.scale);
    WARP_PRODUCT(Gs, w0 * FLD, BC, HS / LK, Vs, w0, Dys, 0, HLD, true, 1.0);
    WARP_SYNC();
    // 2. P^T and dS^T, each lane its runs: query j0 + j is kept from the key on, up to T - 1.
    [[dont_unroll]] for (uint i = 0; i < RUNS; ++i) {
      const uint x = lane + i * LANES;
      if (x >= LM * (BC / 8)) break;
      const uint row = w0 + x / (BC / 8), j = 8 * (x % (BC / 8)), key = k0 + row;
      uvec4 probs, grads;
      [[unroll]] for (uint c = 0; c < 4; ++c) {
        const uint j1 = j + 2 * c, at = row * FLD + j1;
        const bool keep0 = j0 + j1 >= key && j0 + j1 < p.T, keep1 = j0 + j1 + 1 >= key && j0 + j1 + 1 < p.T;
        const float p0 = keep0 ? exp(Fs[at] - Ls[j1]) : 0.0, p1 = keep1 ? exp(Fs[at + 1] - Ls[j1 + 1]) : 0.0;
        probs[c] = pair_out(p0, p1, FORMAT);
        grads[c] = pair_out(p0 * (Gs[at] - Ds[j1]), p1 * (Gs[at + 1] - Ds[j1 + 1]), FORMAT);
      }
      Ps[(row * PLD + j) / 8] = probs, Dss[(row * PLD + j) / 8] = grads;
    }
    WARP_SYNC();
    // 3. dV += P^T dY, dK += dS^T Q (scaled at the end): the queries' and dy's rows are
    // theirs. Then every warp is done with the block (the next staging overwrites it).
    WARP_ACCUMULATE(0, HS, BC, Ps, w0 * PLD, PLD, Dys, 0, HLD, false);
    WARP_ACCUMULATE(HS / LN, HS, BC, Dss, w0 * PLD, PLD, Qs, 0, HLD, false);
    barrier();
  }

  // dV and dK out, a matrix at a time through the warp's rows of F.
  STAGE_LOOP for (uint s = 0; s < 2 * HS / LN; ++s) {
    const bool keys = s >= HS / LN;
    SUM_TO_F(s, keys ? p.scale : 1.0, w0);
    [[dont_unroll]] for (uint x = 2 * lane; x < LM * LN; x += 2 * LANES) {
      const uint t = k0 + w0 + x / LN;
      if (t >= p.T) continue;
      const uint at = (b * p.T + t) * 3 * p.C + (keys ? p.C : 2 * p.C) + h * HS + (s % (HS / LN)) * LN + x % LN;
      const vec2 v = sum_pair(w0, x);
      dqkv[at] = v.x, dqkv[at + 1] = v.y;
      if (COPY) copyw[at / 2] = pair_out(v.x, v.y, FORMAT);
    }
    WARP_SYNC();
  }
}
