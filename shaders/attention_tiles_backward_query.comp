#version 450
// Causal self-attention backward on matrix units, the queries' pass (flash attention's
// backward; the keys' and values' pass is attention_tiles_backward_key_value.comp, after it):
//   dqkv's q part = scale dS K, and delta = dy . y for each row, for the other pass.
// qkv and y in one 16-bit format (FORMAT); lse (B,NH,T), dy (B,T,C), dqkv (B,T,3C) and delta
// (B,NH,T) in fp32. The products read dy rounded to FORMAT, as the matrix form's read its
// packed copy; delta reads it as it is (ops/attention.h).
// A workgroup takes BR query rows of one head (shaders/attention_tiles.glsl): it stages their
// q and dy, and each lane works out lse and delta of the rows of its runs; then it walks the
// keys in blocks of BC up to its last row, each block loaded into registers while the warps
// multiply the one before (FETCH_QKV):
//   1. S = scale Q K^T and dP = dY V^T, each warp its rows, into F and G;
//   2. each lane its runs of eight scores: P = exp(S - lse) under the causal mask, dS = P (dP -
//      delta), rounded to FORMAT into shared memory;
//   3. dS K added to the warp's sums (its gradient's matrices, held across the blocks).
// Between the steps a warp waits for itself alone (WARP_SYNC: they touch only its rows); the
// workgroup waits for the block staged and for every warp done with it.
// At the end each warp's sums pass through its rows of F, and its lanes write scale times
// them into dqkv (with COPY packed beside).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#define BRIGADE_FORMATS  // FORMAT is a specialization constant
#include "attention.h"
#include "formats.glsl"

layout(binding = 0) readonly buffer Qkv { uvec4 qkv8[]; };  // eight 16-bit elements each
layout(binding = 1) readonly buffer Y { uint yw[]; };
layout(binding = 2) readonly buffer Lse { float lse[]; };
layout(binding = 3) readonly buffer Dy4 { vec4 dy4[]; };
layout(binding = 4) buffer Dqkv { float dqkv[]; };
layout(binding = 5) writeonly buffer Delta { float delta[]; };
layout(binding = 6) writeonly buffer Copy { uint copyw[]; };  // dqkv packed, with COPY
layout(constant_id = BRIGADE_ATTENTION_TILES_SPEC_COPY) const bool COPY = false;
layout(push_constant) uniform Push { AttentionPush p; };
#define ATTENTION_SUMS (HS / LN)  // dq's matrices
#define HELD_A (2 * HS / LK)      // the warp's queries, then its dy
#include "attention_tiles.glsl"

shared uvec4 Qs[BR * HLD / 8], Dys[BR * HLD / 8], Ks[BC * HLD / 8], Vs[BC * HLD / 8], Ps[BR * PLD / 8];
shared float Gs[BR * FLD];  // dP, beside F's S

void main() {
  const uint h = gl_WorkGroupID.y, b = p.first + gl_WorkGroupID.z, q0 = gl_WorkGroupID.x * BR;
  const uint warp = tile_warp(), lane = tile_lane(), w0 = warp * LM;
  sums_zero();
  STAGE_QKV(Qs, 0, q0, BR);
  STAGE_ROUNDED_ROWS(Dys, dy4, p.C / 4, h * HS / 4, q0, BR);
  // lse and delta of the rows of the lane's runs, each lane its own (a row's first run writes
  // its delta): in registers, not shared memory, so that four warps fit in 48 KiB.
  float ls[RUNS], ds[RUNS];
  [[dont_unroll]] for (uint i = 0; i < RUNS; ++i) {
    const uint x = lane + i * LANES, t = q0 + w0 + x / (BC / 8);
    float d = 0.0, l = 0.0;
    if (x < LM * (BC / 8) && t < p.T) {
      const uint token = (b * p.T + t) * p.C + h * HS;
      [[dont_unroll]] for (uint c = 0; c < HS; c += 4)
        d += dot(dy4[(token + c) / 4], vec4(pair_in(yw[(token + c) / 2], FORMAT), pair_in(yw[(token + c) / 2 + 1], FORMAT)));
      l = lse[(b * p.NH + h) * p.T + t];
      if (x % (BC / 8) == 0) delta[(b * p.NH + h) * p.T + t] = d;
    }
    ls[i] = l, ds[i] = d;
  }
  barrier();
  HOLD_ROWS(0, Qs, w0);
  HOLD_ROWS(HS / LK, Dys, w0);

  const uint last = min(p.T - 1, q0 + BR - 1);
  uvec4 kf[FETCHES], vf[FETCHES];  // the next block's keys and values
  FETCH_QKV(kf, 1, 0);
  FETCH_QKV(vf, 2, 0);
  for (uint j0 = 0; j0 <= last; j0 += BC) {
    PUT_ROWS(Ks, kf);
    PUT_ROWS(Vs, vf);
    barrier();
    if (j0 + BC <= last) {
      FETCH_QKV(kf, 1, j0 + BC);
      FETCH_QKV(vf, 2, j0 + BC);
    }
    // 1. S = scale Q K^T, dP = dY V^T: the keys' and values' rows are the columns.
    WARP_PRODUCT(Fs, w0 * FLD, BC, 0, Qs, w0, Ks, 0, HLD, true, p.scale);
    WARP_PRODUCT(Gs, w0 * FLD, BC, HS / LK, Dys, w0, Vs, 0, HLD, true, 1.0);
    WARP_SYNC();
    // 2. dS, each lane its runs.
    [[dont_unroll]] for (uint i = 0; i < RUNS; ++i) {
      const uint x = lane + i * LANES;
      if (x >= LM * (BC / 8)) break;
      const uint row = w0 + x / (BC / 8), j = 8 * (x % (BC / 8)), kept = kept_keys(q0 + row, j0);
      uvec4 eight;
      [[unroll]] for (uint c = 0; c < 4; ++c) {
        const uint j1 = j + 2 * c, at = row * FLD + j1;
        const float d0 = j1 < kept ? exp(Fs[at] - ls[i]) * (Gs[at] - ds[i]) : 0.0,
                    d1 = j1 + 1 < kept ? exp(Fs[at + 1] - ls[i]) * (Gs[at + 1] - ds[i]) : 0.0;
        eight[c] = pair_out(d0, d1, FORMAT);
      }
      Ps[(row * PLD + j) / 8] = eight;
    }
    WARP_SYNC();
    // 3. dQ += dS K (scaled at the end): the keys' rows are K's. Then every warp is done with
    // the block.
    WARP_ACCUMULATE(0, HS, BC, Ps, w0 * PLD, PLD, Ks, 0, HLD, false);
    barrier();
  }

  // dQ out, a matrix at a time through the warp's rows of F.
  STAGE_LOOP for (uint s = 0; s < HS / LN; ++s) {
    SUM_TO_F(s, p.scale, w0);
    [[dont_unroll]] for (uint x = 2 * lane; x < LM * LN; x += 2 * LANES) {
      const uint t = q0 + w0 + x / LN;
      if (t >= p.T) continue;
      const uint at = (b * p.T + t) * 3 * p.C + h * HS + s * LN + x % LN;
      const vec2 v = sum_pair(w0, x);
      dqkv[at] = v.x, dqkv[at + 1] = v.y;
      if (COPY) copyw[at / 2] = pair_out(v.x, v.y, FORMAT);
    }
    WARP_SYNC();
  }
}
