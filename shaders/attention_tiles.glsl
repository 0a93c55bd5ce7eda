// What the kernels of flash attention on matrix tiles (attention_tiles_*.comp) share: their
// specialization constants, the shapes of their shared tiles, the tile operations, and the
// staging of a head's rows.
// A workgroup takes BR = WARPS * LM rows of one head (queries, or keys in the backward's
// key/value pass), each warp LM of them, and walks the other side in blocks of BC rows. 16-bit
// rows are staged as stored, eight elements to a uvec4, HLD elements apart; a warp's products
// of a block's scores land as floats in its rows of a shared region F (FLD = BC floats a row);
// what it sums over the blocks (the forward's outputs, the backward's gradients) stays in
// ATTENTION_SUMS accumulators a warp, LM x LN matrices (sums), and the A fragments a warp keeps
// of its own rows of the tiles staged once, in HELD_A held fragments, which the kernel defines
// before including this.
// Included after the kernel's bindings and its push constants `p` (AttentionPush); STAGE_ROWS
// also wants the workgroup's sample b in scope.
#ifndef BRIGADE_SHADERS_ATTENTION_TILES_GLSL
#define BRIGADE_SHADERS_ATTENTION_TILES_GLSL

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
const uint HLD = HS + BRIGADE_ATTENTION_TILES_PAD;  // a staged row of q, k, v or dy
const uint PLD = BC + BRIGADE_ATTENTION_TILES_PAD;  // a row of P or dS (BC of the other side)
const uint FLD = BC;                                // a row of F: a block's scores
// A warp's LM rows of a block's BC scores in runs of eight: run x is row x / (BC / 8), scores
// from 8 (x % (BC / 8)); lane l takes runs l, l + LANES, ..., RUNS of them at most.
const uint RUNS = (LM * (BC / 8) + LANES - 1) / LANES;

// The tile operations on one accumulator of LM x LN a warp (acc), or on sum s of the warp's
// ATTENTION_SUMS (sums[s]). A is an LM x LK matrix of rows from element `at_a` of the shared
// tile `a` (ld_a apart); B the LK x LN matrix from `at_b` of `b`, its rows ld_b apart, or its
// columns with `cols`. Offsets and strides of the 16-bit tiles are multiples of 8: a
// fragment's rows start on 16 bytes.
//   HOLD_A(i, a, at_a, ld_a): A kept as held fragment i, of the kernel's HELD_A, for as long as
//     the kernel runs (a warp's own rows of a tile staged once);
//   held_step(i, a, at_a, ld_a, b, at_b, ld_b, cols): acc += A B, A held fragment i (which
//     HOLD_A took from the same a, at_a, ld_a);
//   load_a(a, at_a, ld_a), then sum_step(s, a, at_a, ld_a, b, at_b, ld_b, cols): sums[s] +=
//     A B, A the one load_a loaded (one load for several sums);
//   tile_store and sum_store put scale times acc or sums[s] as rows of floats at `at` of `to`,
//     ld apart.
// On matrix units a fragment is loaded from shared memory once for every product it takes
// part in; on plain invocations the steps read A from its tile, where it stays.
#ifdef BRIGADE_COOPMAT
coopmat<float, gl_ScopeSubgroup, LM, LN, gl_MatrixUseAccumulator> acc;
coopmat<float, gl_ScopeSubgroup, LM, LN, gl_MatrixUseAccumulator> sums[ATTENTION_SUMS];
void sums_zero() {
  [[unroll]] for (uint s = 0; s < ATTENTION_SUMS; ++s)
    sums[s] = coopmat<float, gl_ScopeSubgroup, LM, LN, gl_MatrixUseAccumulator>(0.0);
}
// Every sum's row r times its factor: the LM x LN floats from `at` of `rows` (each row of LN
// holding its row's factor) loaded as an accumulator, whose components lie where the sums' do.
#define SUMS_SCALE_ROWS(rows, at)                                                                 \
  {                                                                                               \
    coopMatLoad(acc, rows, at, LN, gl_CooperativeMatrixLayoutRowMajor);                           \
    [[unroll]] for (uint s_ = 0; s_ < ATTENTION_SUMS; ++s_)                                       \
      [[unroll]] for (uint i_ = 0; i_ < sums[s_].length(); ++i_) sums[s_][i_] *= acc[i_];         \
  }
coopmat<ELEM, gl_ScopeSubgroup, LM, LK, gl_MatrixUseA> frag_a, held[HELD_A];
coopmat<ELEM, gl_ScopeSubgroup, LK, LN, gl_MatrixUseB> frag_b;
void tile_zero() { acc = coopmat<float, gl_ScopeSubgroup, LM, LN, gl_MatrixUseAccumulator>(0.0); }
#define HOLD_A(i, a, at_a, ld_a) coopMatLoad(held[i], a, (at_a) / 8, (ld_a) / 8, gl_CooperativeMatrixLayoutRowMajor)
#define load_a(a, at_a, ld_a) coopMatLoad(frag_a, a, (at_a) / 8, (ld_a) / 8, gl_CooperativeMatrixLayoutRowMajor)
#define LOAD_B(b, at_b, ld_b, cols)                                                                \
  if (cols) coopMatLoad(frag_b, b, (at_b) / 8, (ld_b) / 8, gl_CooperativeMatrixLayoutColumnMajor); \
  else coopMatLoad(frag_b, b, (at_b) / 8, (ld_b) / 8, gl_CooperativeMatrixLayoutRowMajor)
#define held_step(i, a, at_a, ld_a, b, at_b, ld_b, cols) \
  {                                                      \
    LOAD_B(b, at_b, ld_b, cols);                         \
    acc = coopMatMulAdd(held[i], frag_b, acc);           \
  }
#define sum_step(s, a, at_a, ld_a, b, at_b, ld_b, cols) \
  {                                                     \
    LOAD_B(b, at_b, ld_b, cols);                        \
    sums[s] = coopMatMulAdd(frag_a, frag_b, sums[s]);   \
  }
#define tile_store(scale, to, at, ld) coopMatStore(acc * (scale), to, at, ld, gl_CooperativeMatrixLayoutRowMajor)
#define sum_store(s, scale, to, at, ld) coopMatStore(sums[s] * (scale), to, at, ld, gl_CooperativeMatrixLayoutRowMajor)
#else
const uint TILE_OWNED = LM * LN / LANES;  // element tile_lane() + LANES e of the matrix
float acc[TILE_OWNED];
void tile_zero() {
  [[dont_unroll]] for (uint e = 0; e < TILE_OWNED; ++e) acc[e] = 0.0;
}
float sums[ATTENTION_SUMS * TILE_OWNED];
void sums_zero() {
  [[dont_unroll]] for (uint e = 0; e < ATTENTION_SUMS * TILE_OWNED; ++e) sums[e] = 0.0;
}
#define SUMS_SCALE_ROWS(rows, at)                                                         \
  [[dont_unroll]] for (uint e_ = 0; e_ < ATTENTION_SUMS * TILE_OWNED; ++e_) {             \
    const uint x_ = tile_lane() + (e_ % TILE_OWNED) * LANES;                              \
    sums[e_] *= rows[(at) + x_];                                                          \
  }
// ACC: the accumulator of element e.
#define TILE_MAC(ACC, a, at_a, ld_a, b, at_b, ld_b, cols)                                              \
  [[dont_unroll]] for (uint e = 0; e < TILE_OWNED; ++e) {                                             \
    const uint x = tile_lane() + e * LANES, m = x / LN, n = x % LN;                                    \
    float v_ = ACC;                                                                                    \
    [[dont_unroll]] for (uint k = 0; k < LK; ++k) {                                                    \
      const uint ea = (at_a) + m * (ld_a) + k, eb = (at_b) + (cols ? n * (ld_b) + k : k * (ld_b) + n); \
      v_ += tile_value(a[ea >> 3], ea, FORMAT) * tile_value(b[eb >> 3], eb, FORMAT);                 \
    }                                                                                                  \
    ACC = v_;                                                                                          \
  }
#define HOLD_A(i, a, at_a, ld_a) {}
#define load_a(a, at_a, ld_a) {}
#define held_step(i, a, at_a, ld_a, b, at_b, ld_b, cols) TILE_MAC(acc[e], a, at_a, ld_a, b, at_b, ld_b, cols)
#define sum_step(s, a, at_a, ld_a, b, at_b, ld_b, cols) \
  TILE_MAC(sums[(s) * TILE_OWNED + e], a, at_a, ld_a, b, at_b, ld_b, cols)
#define TILE_STORE_OF(ACC, scale, to, at, ld)                                                  \
  [[dont_unroll]] for (uint e = 0; e < TILE_OWNED; ++e) {                                      \
    const uint x = tile_lane() + e * LANES;                                                     \
    to[(at) + (x / LN) * (ld) + x % LN] = (scale) * ACC;                                        \
  }
#define tile_store(scale, to, at, ld) TILE_STORE_OF(acc[e], scale, to, at, ld)
#define sum_store(s, scale, to, at, ld) TILE_STORE_OF(sums[(s) * TILE_OWNED + e], scale, to, at, ld)
#endif

// The warp's rows of the tile `a` (HS wide, rows HLD apart) from row w0, held as fragments
// h0 .. h0 + HS / LK - 1 (the A of the warp's products with it).
#define HOLD_ROWS(h0, a, w0) \
  STAGE_LOOP for (uint k_ = 0; k_ < HS; k_ += LK) HOLD_A((h0) + k_ / LK, a, (w0) * HLD + k_, HLD)

// A warp's rows w0 .. w0 + LM - 1 of F, from element `at` on: the product of its rows of the
// tile `a` that HOLD_ROWS(h0, a, w0) holds (HS of K) with B from `b` (from `b0`, rows of ldb,
// or columns with `cols`), scaled, in matrices of LN columns over `cols_out` columns.
#define WARP_PRODUCT(to, at, cols_out, h0, a, w0, b, b0, ldb, cols, scale)                                  \
  STAGE_LOOP for (uint jn_ = 0; jn_ < (cols_out); jn_ += LN) {                                             \
    tile_zero();                                                                                           \
    STAGE_LOOP for (uint kk_ = 0; kk_ < HS; kk_ += LK)                                                     \
        held_step((h0) + kk_ / LK, a, (w0) * HLD + kk_, HLD, b,                                            \
                  (cols) ? (b0) + jn_ * (ldb) + kk_ : (b0) + kk_ * (ldb) + jn_, ldb, cols);                \
    tile_store(scale, to, (at) + jn_, FLD);                                                                \
  }

// Adds to the warp's sums s0 .. s0 + cols_out / LN - 1 the product of `len` (K) of A from its
// 16-bit tile `a` (rows of lda from `a0`) with B from `b` (from `b0`, rows of ldb, or columns
// with `cols`), in matrices of LN columns: each of A's matrices loaded once for all of them.
#define WARP_ACCUMULATE(s0, cols_out, len, a, a0, lda, b, b0, ldb, cols)                                  \
  STAGE_LOOP for (uint kk_ = 0; kk_ < (len); kk_ += LK) {                                                 \
    load_a(a, (a0) + kk_, lda);                                                                           \
    STAGE_LOOP for (uint jn_ = 0; jn_ < (cols_out); jn_ += LN)                                            \
      sum_step((s0) + jn_ / LN, a, (a0) + kk_, lda, b, (cols) ? (b0) + jn_ * (ldb) + kk_ : (b0) + kk_ * (ldb) + jn_, ldb, cols); \
  }

// F, the warp's rows of it from w0 * FLD: a block's scores, and on their way out, its sums.
shared float Fs[BR * FLD];

// Sum s of the warp starting at row w0, times scale, into its rows of F (LM x LN from column
// 0), ready for its lanes (sum_pair).
#define SUM_TO_F(s, scale, w0)               \
  sum_store(s, scale, Fs, (w0) * FLD, FLD); \
  WARP_SYNC()
// The pair at element x (even) of the sum SUM_TO_F put in the warp's rows from w0: row x / LN.
vec2 sum_pair(uint w0, uint x) {
  const uint at = (w0 + x / LN) * FLD + x % LN;
  return vec2(Fs[at], Fs[at + 1]);
}

// Where uvec4 x of a block of staged rows lies in its tile (eight elements of row x / (HS / 8),
// rows HLD elements apart), and eight fp32 values rounded to FORMAT as a pack rounds them.
uint staged_at(uint x) { return (x / (HS / 8)) * (HLD / 8) + x % (HS / 8); }
uvec4 rounded8(vec4 lo, vec4 hi) { return uvec4(quad_out(lo, FORMAT), quad_out(hi, FORMAT)); }

// Rows r0 .. r0 + rows - 1 of a token tensor of 16-bit elements (`src`, uvec4s; rows of
// row8 uvec4s, the head's first at first8) into `tile`, HLD elements apart, zeros past T.
// Consecutive invocations copy consecutive uvec4s.
#define STAGE_ROWS(tile, src, row8, first8, r0, rows)                                              \
  [[dont_unroll]] for (uint x_ = gl_LocalInvocationIndex; x_ < (rows) * (HS / 8); x_ += THREADS) { \
    const uint t_ = (r0) + x_ / (HS / 8);                                                         \
    tile[staged_at(x_)] = t_ < p.T ? src[(b * p.T + t_) * (row8) + (first8) + x_ % (HS / 8)] : uvec4(0); \
  }

// The same from fp32 rows (`src`, vec4s; rows of row4 vec4s, the head's first at first4),
// each value rounded to FORMAT as a pack rounds it.
#define STAGE_ROUNDED_ROWS(tile, src, row4, first4, r0, rows)                                     \
  [[dont_unroll]] for (uint x_ = gl_LocalInvocationIndex; x_ < (rows) * (HS / 8); x_ += THREADS) { \
    const uint t_ = (r0) + x_ / (HS / 8), at_ = (b * p.T + t_) * (row4) + (first4) + 2 * (x_ % (HS / 8)); \
    tile[staged_at(x_)] = t_ < p.T ? rounded8(src[at_], src[at_ + 1]) : uvec4(0);                 \
  }

// Where part `part` (q, k, v: 0, 1, 2) of head h starts in a row of qkv, in uvec4s.
uint qkv_head8(uint part) { return (part * p.C + gl_WorkGroupID.y * HS) / 8; }
// STAGE_ROWS from part `part` of the workgroup's head of qkv (every kernel's qkv8).
#define STAGE_QKV(tile, part, r0, rows) STAGE_ROWS(tile, qkv8, 3 * p.C / 8, qkv_head8(part), r0, rows)

// A block of BC rows of the other side staged in two halves, so that the next block's loads
// from memory are in flight while the warps multiply this one: FETCH_* loads an invocation's
// share of rows r0 .. r0 + BC - 1 into its registers (`regs`: FETCHES uvec4s, or for fp32
// rows 2 FETCHES vec4s), and PUT_* stores them into a tile as STAGE_ROWS and
// STAGE_ROUNDED_ROWS would have.
const uint FETCHES = (BC * (HS / 8) + THREADS - 1) / THREADS;
#define FETCH_ROWS(regs, src, row8, first8, r0)                                                   \
  STAGE_LOOP for (uint i_ = 0; i_ < FETCHES; ++i_) {                                              \
    const uint x_ = gl_LocalInvocationIndex + i_ * THREADS, t_ = (r0) + x_ / (HS / 8);           \
    regs[i_] = x_ < BC * (HS / 8) && t_ < p.T ? src[(b * p.T + t_) * (row8) + (first8) + x_ % (HS / 8)] : uvec4(0); \
  }
#define FETCH_QKV(regs, part, r0) FETCH_ROWS(regs, qkv8, 3 * p.C / 8, qkv_head8(part), r0)
#define PUT_ROWS(tile, regs)                                                                 \
  STAGE_LOOP for (uint i_ = 0; i_ < FETCHES; ++i_) {                                         \
    const uint x_ = gl_LocalInvocationIndex + i_ * THREADS;                                   \
    if (x_ < BC * (HS / 8)) tile[staged_at(x_)] = regs[i_];                                  \
  }
#define FETCH_ROUNDED_ROWS(regs, src, row4, first4, r0)                                               \
  STAGE_LOOP for (uint i_ = 0; i_ < FETCHES; ++i_) {                                                  \
    const uint x_ = gl_LocalInvocationIndex + i_ * THREADS, t_ = (r0) + x_ / (HS / 8);               \
    const bool in_ = x_ < BC * (HS / 8) && t_ < p.T;                                                  \
    const uint at_ = (b * p.T + t_) * (row4) + (first4) + 2 * (x_ % (HS / 8));                        \
    regs[2 * i_] = in_ ? src[at_] : vec4(0.0), regs[2 * i_ + 1] = in_ ? src[at_ + 1] : vec4(0.0);     \
  }
#define PUT_ROUNDED_ROWS(tile, regs)                                                                  \
  STAGE_LOOP for (uint i_ = 0; i_ < FETCHES; ++i_) {                                                  \
    const uint x_ = gl_LocalInvocationIndex + i_ * THREADS;                                            \
    if (x_ < BC * (HS / 8)) tile[staged_at(x_)] = rounded8(regs[2 * i_], regs[2 * i_ + 1]);           \
  }

// How many keys of the block from key j0 query t keeps (the causal mask, and T): j0 .. j0 + n - 1.
uint kept_keys(uint t, uint j0) { return min(t, p.T - 1) + 1 - min(j0, t + 1); }

#endif
