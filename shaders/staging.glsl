// What the kernels that stage BM x BK tiles of op(A) and BK x BN of op(B) in shared memory
// (matmul_shared.comp, matmul_tiles.comp) share: a tile moves in runs of RUN elements along a
// row of the storage, one wide load where VEC4_A or VEC4_B says every row and matrix starts
// aligned to a run and the run lies wholly inside, one element at a time otherwise;
// consecutive invocations take consecutive runs. load_tile brings a tile's runs into registers
// (next_a, next_b; a kernel that keeps TILES_AHEAD tiles in flight there has that many slots),
// from where the kernel stores them in its own layout.
// A run is a quad of values, a vec4 (matmul_shared.comp), or with BRIGADE_STAGE_BITS eight
// 16-bit elements' bits as stored, a uvec4 (matmul_tiles.comp: the bits go to shared memory as
// they are, 16 bytes a run, with no conversion; zero bits past an edge are +0.0).
// Included after matmul_io.glsl, with BM, BN, BK, THREADS, VEC4_A, VEC4_B and CAUSAL declared,
// and STAGE_LOOP where the kernel wants its loops kept rolled (tiles.glsl).
#ifndef BRIGADE_SHADERS_STAGING_GLSL
#define BRIGADE_SHADERS_STAGING_GLSL

#ifdef BRIGADE_STAGE_BITS
const uint RUN = 8;
#define RUN_T uvec4
// Element i's 16 bits of a word-packed operand, placed as element c of a run.
#define RUN_SET(v, c, words, i) v[(c) >> 1] |= ((words[(i) >> 1] >> (((i) & 1u) << 4)) & 0xFFFFu) << (((c) & 1u) << 4)
#define RUN_A(r) aw4[r]
#define RUN_B(r) bw4[r]
#define RUN_SET_A(v, c, i) RUN_SET(v, c, aw, i)
#define RUN_SET_B(v, c, i) RUN_SET(v, c, bw, i)
#else
const uint RUN = 4;
#define RUN_T vec4
#define RUN_A(r) fetch_a4(r)
#define RUN_B(r) fetch_b4(r)
#define RUN_SET_A(v, c, i) v[c] = fetch_a(i)
#define RUN_SET_B(v, c, i) v[c] = fetch_b(i)
#endif

// Where run q of A's tile starts, (m, k), and of B's, (k, n), within the tile.
uvec2 a_run_at(uint q) { return TRANS_A ? uvec2(RUN * (q % (BM / RUN)), q / (BM / RUN)) : uvec2(q / (BK / RUN), RUN * (q % (BK / RUN))); }
uvec2 b_run_at(uint q) { return TRANS_B ? uvec2(RUN * (q % (BK / RUN)), q / (BK / RUN)) : uvec2(q / (BN / RUN), RUN * (q % (BN / RUN))); }

// RUN elements of op(A) from (m, k): along k, or along m with TRANS_A; zero past an edge.
RUN_T fetch_a_run(uint base, uint m, uint k) {
  const bool whole = TRANS_A ? k < p.K && m + RUN - 1 < p.M : m < p.M && k + RUN - 1 < p.K;
  const uint at = base + (TRANS_A ? k * p.lda + m : m * p.lda + k);
  if (VEC4_A && whole) return RUN_A(at / RUN);
  RUN_T v = RUN_T(0);
  [[dont_unroll]] for (uint c = 0; c < RUN; ++c) {
    const uint mm = TRANS_A ? m + c : m, kk = TRANS_A ? k : k + c;
    if (mm < p.M && kk < p.K) RUN_SET_A(v, c, at + c);
  }
  return v;
}

// RUN elements of op(B) from (k, n): along n, or along k with TRANS_B; zero past an edge.
RUN_T fetch_b_run(uint base, uint k, uint n) {
  const bool whole = TRANS_B ? n < p.N && k + RUN - 1 < p.K : k < p.K && n + RUN - 1 < p.N;
  const uint at = base + (TRANS_B ? n * p.ldb + k : k * p.ldb + n);
  if (VEC4_B && whole) return RUN_B(at / RUN);
  RUN_T v = RUN_T(0);
  [[dont_unroll]] for (uint c = 0; c < RUN; ++c) {
    const uint kk = TRANS_B ? k + c : k, nn = TRANS_B ? n : n + c;
    if (kk < p.K && nn < p.N) RUN_SET_B(v, c, at + c);
  }
  return v;
}

#ifndef STAGE_LOOP
#define STAGE_LOOP [[unroll]]
#endif

#ifndef TILES_AHEAD
#define TILES_AHEAD 1
#endif
// Runs of a tile per invocation, and the next tiles' on their way to shared memory: slot `s`
// of TILES_AHEAD at next_a[s * QA ..] and next_b[s * QB ..].
const uint QA = (BM * BK / RUN + THREADS - 1) / THREADS, QB = (BN * BK / RUN + THREADS - 1) / THREADS;
RUN_T next_a[TILES_AHEAD * QA], next_b[TILES_AHEAD * QB];

// Loads the tile of term `term` from k0 (A's rows mb.., B's columns nb..) into slot `slot` of
// next_a, next_b (a constant where the kernel calls it: the registers are indexed by it).
void load_tile(uint term, uint k0, uint mb, uint nb, uint slot) {
  const uint abase = matrix_at(p.offset_a, term, p.stride_a, p.head_stride_a),
             bbase = matrix_at(p.offset_b, term, p.stride_b, p.head_stride_b);
  STAGE_LOOP for (uint r = 0; r < QA; ++r) {
    const uvec2 at = a_run_at(min(gl_LocalInvocationIndex + r * THREADS, BM * BK / RUN - 1));
    next_a[slot * QA + r] = fetch_a_run(abase, mb + at.x, k0 + at.y);
  }
  STAGE_LOOP for (uint r = 0; r < QB; ++r) {
    const uvec2 at = b_run_at(min(gl_LocalInvocationIndex + r * THREADS, BN * BK / RUN - 1));
    next_b[slot * QB + r] = fetch_b_run(bbase, k0 + at.x, nb + at.y);
  }
}
void load_tile(uint term, uint k0, uint mb, uint nb) { load_tile(term, k0, mb, nb, 0); }

// The block of C the workgroup computes, (row of blocks, column of blocks): the workgroups in
// order (x along the columns of blocks first) take them in groups of GROUP rows of blocks, down
// a group's rows, then its next column (the last group may have fewer rows); with GROUP 0 or 1,
// the workgroup's own (y, x).
layout(constant_id = BRIGADE_MATMUL_SPEC_GROUP) const uint GROUP = 0;
uvec2 block_at() {
  if (GROUP <= 1) return uvec2(gl_WorkGroupID.y, gl_WorkGroupID.x);
  const uint columns = gl_NumWorkGroups.x, per_group = GROUP * columns;
  const uint id = gl_WorkGroupID.y * columns + gl_WorkGroupID.x, within = id % per_group;
  const uint first = (id / per_group) * GROUP, rows = min(gl_NumWorkGroups.y - first, GROUP);
  return uvec2(first + within % rows, within / rows);
}

// The K tiles [x, y) of each term that the block of rows mb .. mb + BM - 1 and columns nb ..
// needs (shaders/matmul.h): a causal product's leaves out the tiles wholly right of the block's
// last row (K_TO_ROW) or left of its first (K_FROM_ROW), or all of them for a block wholly
// above the diagonal (SKIP_ABOVE, whose C there is unspecified); every tile otherwise. A tile
// taken is taken whole: what of it lies past the block's diagonal is op(A)'s zeros. A part of
// a split K (K_CHUNK, a multiple of BK) takes its own tiles.
layout(constant_id = BRIGADE_MATMUL_SPEC_K_CHUNK) const uint K_CHUNK = 0;
uvec2 needed_tiles(uint mb, uint nb) {
  const uint tiles = (p.K + BK - 1) / BK;
  if (K_CHUNK != 0) {
    const uint first = gl_WorkGroupID.z * (K_CHUNK / BK);
    return uvec2(min(first, tiles), min(tiles, first + K_CHUNK / BK));
  }
  if (CAUSAL == BRIGADE_MATMUL_CAUSAL_K_TO_ROW) return uvec2(0, (min(p.K, mb + BM) + BK - 1) / BK);
  if (CAUSAL == BRIGADE_MATMUL_CAUSAL_K_FROM_ROW) return uvec2(min(p.K, mb) / BK, tiles);
  if (CAUSAL == BRIGADE_MATMUL_CAUSAL_SKIP_ABOVE && nb > mb + BM - 1) return uvec2(0, 0);
  return uvec2(0, tiles);
}

#endif
