#version 450
// Causal self-attention forward on matrix units: flash attention, the (T,T) scores never
// stored. qkv (B,T,3C) and y (B,T,C) in one 16-bit format (FORMAT, the matrices' ELEM in the
// cooperative-matrix builds); lse (B,NH,T) in fp32, the log-sum-exp of each row's scaled
// scores, as every attention form saves it for the backward.
// A workgroup takes BR = WARPS * LM query rows of one head; each warp owns LM of them. It
// stages its queries in shared memory once, then walks the keys in blocks of BC up to its last
// row, each block's keys and values staged as stored (16-bit bits, eight to a uvec4), and for
// each block:
//   1. each warp multiplies its queries by the block's keys on the tile operations: S, scaled,
//      to the warp's rows of the shared floats F;
//   2. a lane a row runs the online softmax over the block's scores: the running max m and sum
//      l, the causal mask, P = exp(s - m) rounded to FORMAT into shared memory (as the matrix
//      form rounds P for its product), and the factor the row's output is rescaled by;
//   3. each warp multiplies its P by the block's values into F;
//   4. every lane rescales the outputs it holds in registers and adds the block's.
// The sums over a block run in the tile operations' order; l sums the unrounded exponentials.
// At the end y = O / l, rounded to FORMAT, and lse = m + log(l).
// The tile operations are cooperative matrices where the device has them (the _coopmat builds,
// shaders/warps.glsl), plain invocations elsewhere: one accumulator of LM x LN a warp at a time.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#define BRIGADE_FORMATS  // FORMAT is a specialization constant
#include "attention.h"
#include "formats.glsl"

layout(local_size_x = 128) in;
layout(local_size_x_id = BRIGADE_ATTENTION_TILES_SPEC_WG) in;
layout(constant_id = BRIGADE_ATTENTION_SPEC_HS) const uint HS = 64;
layout(constant_id = BRIGADE_ATTENTION_SPEC_BC) const uint BC = 32;
layout(constant_id = BRIGADE_ATTENTION_TILES_SPEC_LM) const uint LM = 16;
layout(constant_id = BRIGADE_ATTENTION_TILES_SPEC_LN) const uint LN = 16;
layout(constant_id = BRIGADE_ATTENTION_TILES_SPEC_LK) const uint LK = 16;
layout(constant_id = BRIGADE_ATTENTION_TILES_SPEC_LANES) const uint LANES = 32;
layout(constant_id = BRIGADE_ATTENTION_TILES_SPEC_WARPS) const uint WARPS = 4;
BRIGADE_FORMAT(BRIGADE_ATTENTION_TILES_SPEC_FORMAT, FORMAT);

#include "warps.glsl"

const uint BR = WARPS * LM, THREADS = WARPS * LANES;
const uint HLD = HS + BRIGADE_ATTENTION_TILES_PAD;  // a staged row of queries, keys or values
const uint PLD = BC + BRIGADE_ATTENTION_TILES_PAD;  // a row of P
const uint FLD = BC > HS ? BC : HS;                 // a row of F: a block's scores, or outputs
const uint RPL = (LM + LANES - 1) / LANES;          // rows of the softmax a lane runs
const uint OWNED = LM * HS / LANES;                 // outputs a lane holds (pairs of a row)

layout(binding = 0) readonly buffer Qkv { uvec4 qkv8[]; };  // eight 16-bit elements each
layout(binding = 1) writeonly buffer Y { uint yw[]; };
layout(binding = 2) writeonly buffer Lse { float lse[]; };
layout(push_constant) uniform Push { AttentionPush p; };

shared uvec4 Qs[BR * HLD / 8], Ks[BC * HLD / 8], Vs[BC * HLD / 8], Ps[BR * PLD / 8];
shared float Fs[BR * FLD];
shared float Rs[BR];  // each row's rescale factor, then 1 / l

// The tile operations on one accumulator of LM x LN a warp: tile_step adds A times B, A the
// LM x LK matrix of rows from element `at_a` of the shared tile `a` (ld_a apart), B the LK x
// LN matrix from `at_b` of `b`, its rows ld_b apart, or its columns with `cols`; tile_store
// puts scale times the sums as rows of floats at `at` of `to`, ld apart. Offsets and strides
// of the 16-bit tiles are multiples of 8: a fragment's rows start on 16 bytes.
#ifdef BRIGADE_COOPMAT
coopmat<float, gl_ScopeSubgroup, LM, LN, gl_MatrixUseAccumulator> acc;
coopmat<ELEM, gl_ScopeSubgroup, LM, LK, gl_MatrixUseA> frag_a;
coopmat<ELEM, gl_ScopeSubgroup, LK, LN, gl_MatrixUseB> frag_b;
void tile_zero() { acc = coopmat<float, gl_ScopeSubgroup, LM, LN, gl_MatrixUseAccumulator>(0.0); }
#define tile_step(a, at_a, ld_a, b, at_b, ld_b, cols)                                           \
  {                                                                                             \
    coopMatLoad(frag_a, a, (at_a) / 8, (ld_a) / 8, gl_CooperativeMatrixLayoutRowMajor);         \
    if (cols) coopMatLoad(frag_b, b, (at_b) / 8, (ld_b) / 8, gl_CooperativeMatrixLayoutColumnMajor); \
    else coopMatLoad(frag_b, b, (at_b) / 8, (ld_b) / 8, gl_CooperativeMatrixLayoutRowMajor);    \
    acc = coopMatMulAdd(frag_a, frag_b, acc);                                                   \
  }
#define tile_store(scale, to, at, ld) coopMatStore(acc * (scale), to, at, ld, gl_CooperativeMatrixLayoutRowMajor)
#else
const uint TILE_OWNED = LM * LN / LANES;  // element tile_lane() + LANES e of the matrix
float acc[TILE_OWNED];
void tile_zero() {
  [[dont_unroll]] for (uint e = 0; e < TILE_OWNED; ++e) acc[e] = 0.0;
}
#define tile_step(a, at_a, ld_a, b, at_b, ld_b, cols)                                      \
  [[dont_unroll]] for (uint e = 0; e < TILE_OWNED; ++e) {                                 \
    const uint x = tile_lane() + e * LANES, m = x / LN, n = x % LN;                        \
    float s = acc[e];                                                                      \
    [[dont_unroll]] for (uint k = 0; k < LK; ++k) {                                        \
      const uint ea = (at_a) + m * (ld_a) + k, eb = (at_b) + (cols ? n * (ld_b) + k : k * (ld_b) + n); \
      s += tile_value(a[ea >> 3], ea, FORMAT) * tile_value(b[eb >> 3], eb, FORMAT);      \
    }                                                                                      \
    acc[e] = s;                                                                            \
  }
#define tile_store(scale, to, at, ld)                                                           \
  [[dont_unroll]] for (uint e = 0; e < TILE_OWNED; ++e) {                                      \
    const uint x = tile_lane() + e * LANES;                                                     \
    to[(at) + (x / LN) * (ld) + x % LN] = (scale) * acc[e];                                     \
  }
#endif

// Rows r0 .. r0 + rows - 1 of part `part` (q, k, v: 0, 1, 2) of head h of sample b into
// `tile`, HLD elements apart, zeros past T. Consecutive invocations copy consecutive uvec4s.
#define STAGE_ROWS(tile, r0, rows, part)                                                         \
  [[dont_unroll]] for (uint x = gl_LocalInvocationIndex; x < (rows) * (HS / 8); x += THREADS) { \
    const uint r = x / (HS / 8), c = x % (HS / 8), t = (r0) + r;                                \
    tile[r * (HLD / 8) + c] =                                                                   \
        t < p.T ? qkv8[((b * p.T + t) * 3 * p.C + (part) * p.C + h * HS) / 8 + c] : uvec4(0);   \
  }

void main() {
  const uint h = gl_WorkGroupID.y, b = gl_WorkGroupID.z, q0 = gl_WorkGroupID.x * BR;
  const uint warp = tile_warp(), lane = tile_lane(), w0 = warp * LM;  // the warp's first row
  float m[RPL], l[RPL], o[OWNED];
  [[dont_unroll]] for (uint i = 0; i < RPL; ++i) m[i] = -3.402823466e38, l[i] = 0.0;
  STAGE_LOOP for (uint e = 0; e < OWNED; ++e) o[e] = 0.0;
  STAGE_ROWS(Qs, q0, BR, 0);

  const uint last = min(p.T - 1, q0 + BR - 1);  // the workgroup's last query sees keys 0 .. last
  for (uint j0 = 0; j0 <= last; j0 += BC) {
    STAGE_ROWS(Ks, j0, BC, 1);
    STAGE_ROWS(Vs, j0, BC, 2);
    barrier();
    // 1. S = scale Q K^T: the keys' rows are K^T's columns.
    STAGE_LOOP for (uint jn = 0; jn < BC; jn += LN) {
      tile_zero();
      STAGE_LOOP for (uint kk = 0; kk < HS; kk += LK) tile_step(Qs, w0 * HLD + kk, HLD, Ks, jn * HLD + kk, HLD, true);
      tile_store(p.scale, Fs, w0 * FLD + jn, FLD);
    }
    barrier();
    // 2. The online softmax, a lane a row. Key 0 is in every row's first block, so m is a
    // score's after it.
    [[dont_unroll]] for (uint i = 0; i < RPL; ++i) {
      const uint r = lane + i * LANES;
      if (r >= LM) break;
      const uint row = w0 + r, t = q0 + row, kept = min(t, p.T - 1) + 1 - min(j0, t + 1);  // keys kept
      float top = m[i];
      [[dont_unroll]] for (uint j = 0; j < min(kept, BC); ++j) top = max(top, Fs[row * FLD + j]);
      float sum = 0.0;
      [[dont_unroll]] for (uint j = 0; j < BC; j += 8) {
        uvec4 eight;
        [[unroll]] for (uint c = 0; c < 4; ++c) {
          const uint j1 = j + 2 * c;
          const float e0 = j1 < kept ? exp(Fs[row * FLD + j1] - top) : 0.0,
                      e1 = j1 + 1 < kept ? exp(Fs[row * FLD + j1 + 1] - top) : 0.0;
          sum += e0 + e1;
          eight[c] = pair_out(e0, e1, FORMAT);
        }
        Ps[(row * PLD + j) / 8] = eight;
      }
      const float rescale = exp(m[i] - top);
      l[i] = l[i] * rescale + sum, m[i] = top;
      Rs[row] = rescale;
    }
    barrier();
    // 3. The block's outputs, P V.
    STAGE_LOOP for (uint jn = 0; jn < HS; jn += LN) {
      tile_zero();
      STAGE_LOOP for (uint kk = 0; kk < BC; kk += LK) tile_step(Ps, w0 * PLD + kk, PLD, Vs, kk * HLD + jn, HLD, false);
      tile_store(1.0, Fs, w0 * FLD + jn, FLD);
    }
    barrier();
    // 4. O = O * rescale + P V, pairs of a row a lane.
    STAGE_LOOP for (uint e = 0; e < OWNED; e += 2) {
      const uint x = 2 * lane + e * LANES, row = w0 + x / HS, c = x % HS;
      const float rescale = Rs[row];
      o[e] = o[e] * rescale + Fs[row * FLD + c], o[e + 1] = o[e + 1] * rescale + Fs[row * FLD + c + 1];
    }
    barrier();
  }

  [[dont_unroll]] for (uint i = 0; i < RPL; ++i) {
    const uint r = lane + i * LANES;
    if (r >= LM) break;
    const uint t = q0 + w0 + r;
    Rs[w0 + r] = 1.0 / l[i];  // l >= 1: the maximum's own term is exp(0)
    if (t < p.T) lse[(b * p.NH + h) * p.T + t] = m[i] + log(l[i]);
  }
  barrier();
  STAGE_LOOP for (uint e = 0; e < OWNED; e += 2) {
    const uint x = 2 * lane + e * LANES, row = w0 + x / HS, c = x % HS, t = q0 + row;
    const float inv = Rs[row];
    if (t < p.T) yw[((b * p.T + t) * p.C + h * HS + c) / 2] = pair_out(o[e] * inv, o[e + 1] * inv, FORMAT);
  }
}
