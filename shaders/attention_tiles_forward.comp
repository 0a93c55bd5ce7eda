#version 450
// Causal self-attention forward on matrix units: flash attention, the (T,T) scores never
// stored. qkv (B,T,3C) and y (B,T,C) in one 16-bit format (FORMAT, the matrices' ELEM in the
// cooperative-matrix builds); lse (B,NH,T) in fp32, the log-sum-exp of each row's scaled
// scores, as every attention form saves it for the backward.
// A workgroup takes BR = WARPS * LM query rows of one head; each warp owns LM of them. It
// stages its queries in shared memory once, then walks the keys in blocks of BC up to its last
// row, each block's keys and values staged as stored (16-bit bits, eight to a uvec4; loaded
// into registers while the warps multiply the block before, FETCH_QKV), and for each block:
//   1. each warp multiplies its queries by the block's keys on the tile operations: S, scaled,
//      to the warp's rows of the shared floats F;
//   2. the online softmax over the block's scores, every lane of the warp on runs of eight
//      scores (as the backward's element-wise steps): (a) each run's largest kept score; (b)
//      the row's new running max m from its runs' and its last, the factor its output is
//      rescaled by (along its row, each run a share), and each run's P = exp(s - m) under the
//      causal mask, rounded to FORMAT into shared memory (as the matrix form rounds P for its
//      product), and the run's sum of them; (c) a lane a row: the row's sum l, and m;
//   3. each warp rescales its outputs O, held in accumulators across the blocks (its sums, a
//      row's factor broadcast along its row in shared memory), and adds P V to them.
// Steps 1 to 3 touch only the warp's own rows of F, P, the runs' partials and the rows' m, l and
// factors, so between them a warp waits for itself alone (WARP_SYNC); the workgroup waits
// twice a block: for the block's keys and values staged, and for every warp done with them.
// The sums run in the tile operations' order, block after block; l sums the unrounded
// exponentials, run by run. At the end y = O / l, rounded to FORMAT (through the warp's rows of
// F), and lse = m + log(l).
// The tile operations are cooperative matrices where the device has them (the _coopmat builds,
// shaders/warps.glsl), plain invocations elsewhere (shaders/attention_tiles.glsl).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#define BRIGADE_FORMATS  // FORMAT is a specialization constant
#include "attention.h"
#include "formats.glsl"

layout(binding = 0) readonly buffer Qkv { uvec4 qkv8[]; };  // eight 16-bit elements each
layout(binding = 1) writeonly buffer Y { uint yw[]; };
layout(binding = 2) writeonly buffer Lse { float lse[]; };
layout(push_constant) uniform Push { AttentionPush p; };
#define ATTENTION_SUMS (HS / LN)  // O's matrices
#define HELD_A (HS / LK)          // the warp's queries
#include "attention_tiles.glsl"

shared uvec4 Qs[BR * HLD / 8], Ks[BC * HLD / 8], Vs[BC * HLD / 8], Ps[BR * PLD / 8];
shared float Rs[BR * LN];  // each row's rescale factor, then 1 / l, along its row
shared float Ms[BR], Ls[BR];             // each row's running max m and sum l
shared float Xs[BR * (BC / 8)], Ss[BR * (BC / 8)];  // each run's largest kept score, its sum

void main() {
  const uint h = gl_WorkGroupID.y, b = p.first + gl_WorkGroupID.z, q0 = gl_WorkGroupID.x * BR;
  const uint warp = tile_warp(), lane = tile_lane(), w0 = warp * LM;  // the warp's first row
  [[dont_unroll]] for (uint r = lane; r < LM; r += LANES) Ms[w0 + r] = -3.402823466e38, Ls[w0 + r] = 0.0;
  sums_zero();
  STAGE_QKV(Qs, 0, q0, BR);
  barrier();
  HOLD_ROWS(0, Qs, w0);

  const uint last = min(p.T - 1, q0 + BR - 1);  // the workgroup's last query sees keys 0 .. last
  uvec4 kf[FETCHES], vf[FETCHES];                  // the next block's keys and values
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
    // 1. S = scale Q K^T: the keys' rows are K^T's columns.
    WARP_PRODUCT(Fs, w0 * FLD, BC, 0, Qs, w0, Ks, 0, HLD, true, p.scale);
    WARP_SYNC();
    // 2a. Each run's largest kept score. Key 0 is in every row's first block, so m is a score's
    // after it.
    [[dont_unroll]] for (uint i = 0; i < RUNS; ++i) {
      const uint x = lane + i * LANES;
      if (x >= LM * (BC / 8)) break;
      const uint row = w0 + x / (BC / 8), j = 8 * (x % (BC / 8)), kept = kept_keys(q0 + row, j0);
      float top = -3.402823466e38;
      [[unroll]] for (uint c = 0; c < 8; ++c)
        if (j + c < kept) top = max(top, Fs[row * FLD + j + c]);
      Xs[w0 * (BC / 8) + x] = top;
    }
    WARP_SYNC();
    // 2b. The row's new m, then each run's P, rounded, and its sum; the row's factor along
    // its row, each run its share.
    [[dont_unroll]] for (uint i = 0; i < RUNS; ++i) {
      const uint x = lane + i * LANES;
      if (x >= LM * (BC / 8)) break;
      const uint row = w0 + x / (BC / 8), j = 8 * (x % (BC / 8)), kept = kept_keys(q0 + row, j0);
      float top = Ms[row];
      [[dont_unroll]] for (uint c = 0; c < BC / 8; ++c) top = max(top, Xs[row * (BC / 8) + c]);
      const float rescale = exp(Ms[row] - top);
      [[dont_unroll]] for (uint c = x % (BC / 8); c < LN; c += BC / 8) Rs[row * LN + c] = rescale;
      float sum = 0.0;
      uvec4 eight;
      [[unroll]] for (uint c = 0; c < 4; ++c) {
        const uint j1 = j + 2 * c;
        const float e0 = j1 < kept ? exp(Fs[row * FLD + j1] - top) : 0.0,
                    e1 = j1 + 1 < kept ? exp(Fs[row * FLD + j1 + 1] - top) : 0.0;
        sum += e0 + e1;
        eight[c] = pair_out(e0, e1, FORMAT);
      }
      Ps[(row * PLD + j) / 8] = eight;
      Ss[w0 * (BC / 8) + x] = sum;
    }
    WARP_SYNC();
    // 2c. A lane a row: l and m.
    [[dont_unroll]] for (uint r = lane; r < LM; r += LANES) {
      const uint row = w0 + r;
      float top = Ms[row], sum = 0.0;
      [[dont_unroll]] for (uint c = 0; c < BC / 8; ++c)
        top = max(top, Xs[row * (BC / 8) + c]), sum += Ss[row * (BC / 8) + c];
      Ls[row] = Ls[row] * exp(Ms[row] - top) + sum, Ms[row] = top;
    }
    WARP_SYNC();
    // 3. O = O * rescale + P V; then every warp is done with the block's keys and values.
    SUMS_SCALE_ROWS(Rs, w0 * LN);
    WARP_ACCUMULATE(0, HS, BC, Ps, w0 * PLD, PLD, Vs, 0, HLD, false);
    barrier();
  }

  [[dont_unroll]] for (uint r = lane; r < LM; r += LANES) {
    const uint row = w0 + r, t = q0 + row;
    // l >= 1: the maximum's own term is exp(0).
    [[dont_unroll]] for (uint c = 0; c < LN; ++c) Rs[row * LN + c] = 1.0 / Ls[row];
    if (t < p.T) lse[(b * p.NH + h) * p.T + t] = Ms[row] + log(Ls[row]);
  }
  WARP_SYNC();
  SUMS_SCALE_ROWS(Rs, w0 * LN);
  // y out, a matrix at a time through the warp's rows of F.
  STAGE_LOOP for (uint s = 0; s < HS / LN; ++s) {
    SUM_TO_F(s, 1.0, w0);
    [[dont_unroll]] for (uint x = 2 * lane; x < LM * LN; x += 2 * LANES) {
      const uint t = q0 + w0 + x / LN;
      if (t >= p.T) continue;
      const vec2 v = sum_pair(w0, x);
      yw[((b * p.T + t) * p.C + h * HS + s * LN + x % LN) / 2] = pair_out(v.x, v.y, FORMAT);
    }
    WARP_SYNC();
  }
}
