#version 450
// matmul.comp's product (shaders/matmul.h) on matrix units: op(A) and op(B) stored in 16
// bits (FORMAT_A = FORMAT_B, the matrices' element type), fp32 accumulators, C and the
// epilogues exactly as matmul.comp stores them (shaders/matmul_io.glsl).
// A workgroup computes a BM x BN block of C: it stages BM x BK of op(A) and BK x BN of op(B)
// in shared memory, the 16-bit elements' bits copied as stored, eight (16 bytes) at a time,
// laid out as the operand is (a transposed one column-major), what lies past an edge as zero;
// the next tile is loaded into registers while this one multiplies (with STAGES = 2 it goes on
// to the other copy of the tiles while the warps still read this one, one barrier a tile, rather
// than waiting for them: two barriers a tile; with AHEAD = 2 as well, two tiles are in flight in
// registers, each loaded two tiles before it is staged). Then each warp multiplies its
// TILES_M x TILES_N matrices of LM x LN through the tile operations (shaders/tiles.glsl):
// cooperative matrices where the device has them (the _coopmat builds), plain invocations
// elsewhere. The sums run over K in order, tile after tile, term after term.
// At the end each warp's matrices pass, one at a time, through the warp's own shared scratch
// tile, from which its lanes store them to C with the epilogue, the warp waiting for itself
// alone (WARP_SYNC, shaders/warps.glsl).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#define BRIGADE_FORMATS  // A, B and C's formats are specialization constants
#include "matmul.h"
#include "gelu.glsl"
#include "relu.glsl"
#include "formats.glsl"

layout(local_size_x = 128) in;
layout(local_size_x_id = BRIGADE_TILES_SPEC_WG) in;

layout(constant_id = BRIGADE_TILES_SPEC_LM) const uint LM = 16;
layout(constant_id = BRIGADE_TILES_SPEC_LN) const uint LN = 16;
layout(constant_id = BRIGADE_TILES_SPEC_LK) const uint LK = 16;
layout(constant_id = BRIGADE_TILES_SPEC_TILES_M) const uint TILES_M = 2;
layout(constant_id = BRIGADE_TILES_SPEC_TILES_N) const uint TILES_N = 2;
layout(constant_id = BRIGADE_TILES_SPEC_WARPS_M) const uint WARPS_M = 2;
layout(constant_id = BRIGADE_TILES_SPEC_WARPS_N) const uint WARPS_N = 2;
layout(constant_id = BRIGADE_TILES_SPEC_BK) const uint BK = 32;
layout(constant_id = BRIGADE_TILES_SPEC_LANES) const uint LANES = 32;
layout(constant_id = BRIGADE_TILES_SPEC_FEED) const uint FEED = BRIGADE_TILES_FEED_STAGED;
layout(constant_id = BRIGADE_TILES_SPEC_STAGES) const uint STAGES = 1;
layout(constant_id = BRIGADE_TILES_SPEC_AHEAD) const uint AHEAD = 1;
layout(constant_id = BRIGADE_MATMUL_SPEC_TRANS_A) const bool TRANS_A = false;
layout(constant_id = BRIGADE_MATMUL_SPEC_TRANS_B) const bool TRANS_B = false;
layout(constant_id = BRIGADE_MATMUL_SPEC_VEC4_A) const bool VEC4_A = false;
layout(constant_id = BRIGADE_MATMUL_SPEC_VEC4_B) const bool VEC4_B = false;
layout(constant_id = BRIGADE_MATMUL_SPEC_BIAS) const uint BIAS = BRIGADE_MATMUL_BIAS_NONE;
layout(constant_id = BRIGADE_MATMUL_SPEC_EPILOGUE) const uint EPILOGUE = BRIGADE_MATMUL_EPILOGUE_NONE;
layout(constant_id = BRIGADE_MATMUL_SPEC_CAUSAL) const uint CAUSAL = BRIGADE_MATMUL_CAUSAL_NONE;
BRIGADE_FORMAT(BRIGADE_MATMUL_SPEC_FORMAT_A, FORMAT_A);
BRIGADE_FORMAT(BRIGADE_MATMUL_SPEC_FORMAT_B, FORMAT_B);
BRIGADE_FORMAT(BRIGADE_MATMUL_SPEC_FORMAT_C, FORMAT_C);
BRIGADE_FORMAT(BRIGADE_MATMUL_SPEC_ROUND_C, ROUND_C);
BRIGADE_FORMAT(BRIGADE_MATMUL_SPEC_FORMAT_E, FORMAT_E);
BRIGADE_FORMAT(BRIGADE_MATMUL_SPEC_FORMAT_COPY, FORMAT_COPY);

const uint WM = TILES_M * LM, WN = TILES_N * LN;  // a warp's outputs
const uint BM = WARPS_M * WM, BN = WARPS_N * WN;  // a workgroup's outputs
const uint WARPS = WARPS_M * WARPS_N, THREADS = WARPS * LANES;
// The shared tiles in elements: op(A)'s element (m, k) at m * A_LD + k, or k * A_LD + m with
// TRANS_A (as A lies in memory); op(B)'s (k, n) at k * B_LD + n, or n * B_LD + k with TRANS_B.
const uint A_LD = TRANS_A ? BM + BRIGADE_TILES_PAD : BK + BRIGADE_TILES_PAD;
const uint B_LD = TRANS_B ? BK + BRIGADE_TILES_PAD : BN + BRIGADE_TILES_PAD;
const uint TILES_A_ELEMENTS = (TRANS_A ? BK : BM) * A_LD, TILES_B_ELEMENTS = (TRANS_B ? BN : BK) * B_LD;
uint a_elem(uint m, uint k) { return TRANS_A ? k * A_LD + m : m * A_LD + k; }
uint b_elem(uint k, uint n) { return TRANS_B ? n * B_LD + k : k * B_LD + n; }

#define BRIGADE_STAGE_BITS
#define TILES_STAGES STAGES
#define TILES_AHEAD AHEAD
#include "matmul_io.glsl"
#include "tiles.glsl"
#include "staging.glsl"

// One LM x LN matrix of each warp at a time, on its way from the accumulators to C.
shared float Cs[WARPS * LM * LN];

// The K tile from k0 of term `term` on its way to shared memory: op(A)[mb + m][k0 + k] at
// a_elem(m, k), op(B)[k0 + k][nb + n] at b_elem(k, n), zero past the edges, in runs of eight
// elements along the operand's rows as stored (staging.glsl). load_tile brings them into
// registers (while the tile before multiplies), store_tile puts each run of slot `slot` in place
// in copy `stage` of the tiles: one uvec4 (a run starts on a multiple of 8 elements, as every
// row of the tile does).
void store_tile(uint stage, uint slot) {
  STAGE_LOOP for (uint r = 0; r < QA; ++r) {
    const uint q = gl_LocalInvocationIndex + r * THREADS;
    if (q >= BM * BK / RUN) break;
    const uvec2 at = a_run_at(q);
    As[(stage * TILES_A_ELEMENTS + a_elem(at.x, at.y)) / 8] = next_a[slot * QA + r];
  }
  STAGE_LOOP for (uint r = 0; r < QB; ++r) {
    const uint q = gl_LocalInvocationIndex + r * THREADS;
    if (q >= BN * BK / RUN) break;
    const uvec2 at = b_run_at(q);
    Bs[(stage * TILES_B_ELEMENTS + b_elem(at.x, at.y)) / 8] = next_b[slot * QB + r];
  }
}

// The warp's sums over the K tile in copy `stage` of the tiles.
void multiply_tile(uint wm, uint wn, uint stage) {
  const uint a0 = stage * TILES_A_ELEMENTS, b0 = stage * TILES_B_ELEMENTS;
  STAGE_LOOP for (uint kk = 0; kk < BK; kk += LK) {
    [[unroll]] for (uint i = 0; i < TILES_M; ++i) tile_load_a(i, a0 + a_elem(wm * WM + i * LM, kk));
    [[unroll]] for (uint j = 0; j < TILES_N; ++j) tile_load_b(j, b0 + b_elem(kk, wn * WN + j * LN));
    [[unroll]] for (uint i = 0; i < TILES_M; ++i)
      [[unroll]] for (uint j = 0; j < TILES_N; ++j) tile_multiply(i, j);
  }
}

// The warp's sums over the K tiles staged in shared memory (FEED_STAGE_ONCE: the first tile
// for every one).
void multiply_staged(uint wm, uint wn, uint mb, uint nb) {
  const bool once = FEED == BRIGADE_TILES_FEED_STAGE_ONCE;
  // The tiles of each term this block needs, then all terms' in turn (a staged tile lies within
  // one term).
  const uvec2 range = needed_tiles(mb, nb);
  const uint tiles = range.y - range.x, steps = p.terms * tiles, term0 = gl_WorkGroupID.z * p.terms;
  // Step s's tile: term term0 + s / tiles, from K (range.x + s % tiles) * BK.
#define LOAD_STEP(s, slot) load_tile(term0 + (s) / tiles, (range.x + (s) % tiles) * BK, mb, nb, slot)
  if (steps > 0) LOAD_STEP(0, 0);
  if (STAGES == 2 && AHEAD == 2 && !once) {
    // Step s's tile in slot s % 2 and copy s % 2; two steps a pass, so that every slot is a
    // constant. Step s loads step s + 2's tile into its own slot (staged in the step before)
    // and stages step s + 1's, loaded in the step before, into the other copy.
    if (steps > 0) store_tile(0, 0);
    if (steps > 1) LOAD_STEP(1, 1);
    barrier();
    for (uint s = 0; s < steps; s += 2) {
      if (s + 2 < steps) LOAD_STEP(s + 2, 0);
      multiply_tile(wm, wn, 0);
      if (s + 1 < steps) store_tile(1, 1);
      barrier();
      if (s + 1 == steps) break;
      if (s + 3 < steps) LOAD_STEP(s + 3, 1);
      multiply_tile(wm, wn, 1);
      if (s + 2 < steps) store_tile(0, 0);
      barrier();
    }
    return;
  }
  if (STAGES == 2 && !once) {
    if (steps > 0) store_tile(0, 0);
    barrier();
    for (uint s = 0; s < steps; ++s) {
      if (s + 1 < steps) LOAD_STEP(s + 1, 0);  // in flight while this tile multiplies
      multiply_tile(wm, wn, s & 1);
      // The other copy was last read in the tile before, which every warp has left.
      if (s + 1 < steps) store_tile((s + 1) & 1, 0);
      barrier();
    }
    return;
  }
  for (uint s = 0; s < steps; ++s) {
    if (!once || s == 0) {
      store_tile(0, 0);
      barrier();
    }
    if (!once && s + 1 < steps) LOAD_STEP(s + 1, 0);  // in flight while this tile multiplies
    multiply_tile(wm, wn, 0);
    if (!once) barrier();
  }
#undef LOAD_STEP
}

#ifdef BRIGADE_COOPMAT
// FEED_DIRECT: the warp's sums with each fragment loaded from A and B where they lie, LK of K at
// a time (the host sends whole blocks only, every row and matrix 16-byte aligned).
void multiply_direct(uint m0, uint n0) {
  for (uint r = 0; r < p.terms; ++r) {
    const uint term = gl_WorkGroupID.z * p.terms + r;
    const uint abase = matrix_at(p.offset_a, term, p.stride_a, p.head_stride_a),
               bbase = matrix_at(p.offset_b, term, p.stride_b, p.head_stride_b);
    for (uint k = 0; k < p.K; k += LK) {
      [[unroll]] for (uint i = 0; i < TILES_M; ++i) {
        const uint m = m0 + i * LM;
        tile_load_a_direct(i, abase + (TRANS_A ? k * p.lda + m : m * p.lda + k), p.lda);
      }
      [[unroll]] for (uint j = 0; j < TILES_N; ++j) {
        const uint n = n0 + j * LN;
        tile_load_b_direct(j, bbase + (TRANS_B ? n * p.ldb + k : k * p.ldb + n), p.ldb);
      }
      [[unroll]] for (uint i = 0; i < TILES_M; ++i)
        [[unroll]] for (uint j = 0; j < TILES_N; ++j) tile_multiply(i, j);
    }
  }
}
#endif

void main() {
  const uint warp = tile_warp(), wm = warp / WARPS_N, wn = warp % WARPS_N;
  const uvec2 block = block_at();
  const uint mb = block.x * BM, nb = block.y * BN;
  tiles_zero();
#ifdef BRIGADE_COOPMAT
  if (FEED == BRIGADE_TILES_FEED_DIRECT) multiply_direct(mb + wm * WM, nb + wn * WN);
  else
#endif
  multiply_staged(wm, wn, mb, nb);

  const uint base = matrix_at(p.offset_c, gl_WorkGroupID.z, p.stride_c, p.head_stride_c);
  const bool pairs = PAIRS_C;  // a word of two outputs an invocation
  const uint step = pairs ? 2 : 1, scratch = warp * LM * LN;
  // Each warp on its own, through its own scratch tile: it waits for its own lanes alone.
  // Unrolled on matrix units: indexed by a variable, the accumulators would have to live in
  // memory an invocation can index (a GPU's local memory) through the whole product.
  STAGE_LOOP for (uint t = 0; t < TILES_M * TILES_N; ++t) {
    TILE_STORE(t, p.alpha, Cs, scratch);  // alpha times the sums, rounded, as matmul.comp's result
    WARP_SYNC();
    const uint m0 = mb + wm * WM + (t / TILES_N) * LM, n0 = nb + wn * WN + (t % TILES_N) * LN;
    [[dont_unroll]] for (uint e = tile_lane() * step; e < LM * LN; e += LANES * step) {
      const uint m = m0 + e / LN, n = n0 + e % LN;
      if (m >= p.M || n >= p.N) continue;
      const uint at = base + m * p.ldc + n, from = scratch + e;
      if (pairs) store_pair(Cs[from], Cs[from + 1], m, n, at);
      else store_one(Cs[from], m, n, at);
    }
    WARP_SYNC();
  }
}
