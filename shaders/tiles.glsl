// The tile operations of the matrix-unit kernel (matmul_tiles.comp), written once for the two
// builds of shaders/warps.glsl:
//   BRIGADE_COOPMAT: LM x LK times LK x LN products of ELEM into fp32 accumulators.
//   otherwise: each of a warp's LANES invocations owns LM * LN / LANES accumulators (element
//     lane + LANES e of a tile), a fragment is where its tile lies in shared memory, and the
//     multiply-accumulate sums over k in order, as the fp32 kernels do.
// The kernel says which warp an invocation belongs to (tile_warp) and stages A and B in the
// shared arrays As and Bs as stored: 16-bit elements, eight to a uvec4, at a_elem(m, k) and
// b_elem(k, n) (rows, or with TRANS_A / TRANS_B columns, A_LD and B_LD elements apart, both
// multiples of 8, as is every fragment's start: each row a load reads starts 16-byte aligned
// by the array's own type, as cooperative-matrix loads from shared memory want);
// everything else it does (staging, the epilogue, edges) is the same code for both.
// Needs, before it: LM, LN, LK, TILES_M, TILES_N, LANES, A_LD, B_LD, TRANS_A, TRANS_B,
// FORMAT_A, FORMAT_B, TILES_A_ELEMENTS, TILES_B_ELEMENTS (multiples of 8), and TILES_STAGES
// where the kernel keeps more than one copy of the tiles.
#ifndef BRIGADE_SHADERS_TILES_GLSL
#define BRIGADE_SHADERS_TILES_GLSL

#include "warps.glsl"

// TILES_STAGES copies of each (the kernel's choice; one by default), TILES_*_ELEMENTS apart.
#ifndef TILES_STAGES
#define TILES_STAGES 1
#endif
shared uvec4 As[TILES_STAGES * TILES_A_ELEMENTS / 8];
shared uvec4 Bs[TILES_STAGES * TILES_B_ELEMENTS / 8];

#ifdef BRIGADE_COOPMAT

coopmat<float, gl_ScopeSubgroup, LM, LN, gl_MatrixUseAccumulator> acc[TILES_M * TILES_N];
coopmat<ELEM, gl_ScopeSubgroup, LM, LK, gl_MatrixUseA> frag_a[TILES_M];
coopmat<ELEM, gl_ScopeSubgroup, LK, LN, gl_MatrixUseB> frag_b[TILES_N];

void tiles_zero() {
  [[unroll]] for (uint t = 0; t < TILES_M * TILES_N; ++t)
    acc[t] = coopmat<float, gl_ScopeSubgroup, LM, LN, gl_MatrixUseAccumulator>(0.0);
}
// Fragment i of A from As at element `at` (LM rows of LK), fragment j of B from Bs (LK of LN):
// the uvec4s read as ELEMs, eight to one, rows or columns as the operand is stored.
void tile_load_a(uint i, uint at) {
  if (TRANS_A) coopMatLoad(frag_a[i], As, at / 8, A_LD / 8, gl_CooperativeMatrixLayoutColumnMajor);
  else coopMatLoad(frag_a[i], As, at / 8, A_LD / 8, gl_CooperativeMatrixLayoutRowMajor);
}
void tile_load_b(uint j, uint at) {
  if (TRANS_B) coopMatLoad(frag_b[j], Bs, at / 8, B_LD / 8, gl_CooperativeMatrixLayoutColumnMajor);
  else coopMatLoad(frag_b[j], Bs, at / 8, B_LD / 8, gl_CooperativeMatrixLayoutRowMajor);
}
// The same fragments straight from A and B as stored (the kernel's FEED_DIRECT; aw4 and bw4,
// matmul_io.glsl): at and ld in elements, multiples of 8.
void tile_load_a_direct(uint i, uint at, uint ld) {
  if (TRANS_A) coopMatLoad(frag_a[i], aw4, at / 8, ld / 8, gl_CooperativeMatrixLayoutColumnMajor);
  else coopMatLoad(frag_a[i], aw4, at / 8, ld / 8, gl_CooperativeMatrixLayoutRowMajor);
}
void tile_load_b_direct(uint j, uint at, uint ld) {
  if (TRANS_B) coopMatLoad(frag_b[j], bw4, at / 8, ld / 8, gl_CooperativeMatrixLayoutColumnMajor);
  else coopMatLoad(frag_b[j], bw4, at / 8, ld / 8, gl_CooperativeMatrixLayoutRowMajor);
}
// Accumulator i * TILES_N + j += fragment i of A times fragment j of B.
void tile_multiply(uint i, uint j) {
  acc[i * TILES_N + j] = coopMatMulAdd(frag_a[i], frag_b[j], acc[i * TILES_N + j]);
}
// Accumulator t times alpha into `to` from element `at`, LM rows of LN, packed.
#define TILE_STORE(t, alpha, to, at) coopMatStore(acc[t] * (alpha), to, at, LN, gl_CooperativeMatrixLayoutRowMajor)

#else

const uint TILE_OWNED = LM * LN / LANES;  // accumulators an invocation holds per tile
float acc[TILES_M * TILES_N * TILE_OWNED];
uint frag_a[TILES_M], frag_b[TILES_N];

void tiles_zero() {
  [[unroll]] for (uint e = 0; e < TILES_M * TILES_N * TILE_OWNED; ++e) acc[e] = 0.0;
}
void tile_load_a(uint i, uint at) { frag_a[i] = at; }
void tile_load_b(uint j, uint at) { frag_b[j] = at; }
void tile_multiply(uint i, uint j) {
  [[dont_unroll]] for (uint e = 0; e < TILE_OWNED; ++e) {
    const uint x = tile_lane() + e * LANES, m = x / LN, n = x % LN;
    float s = acc[(i * TILES_N + j) * TILE_OWNED + e];
    [[dont_unroll]] for (uint k = 0; k < LK; ++k) {
      const uint ea = frag_a[i] + (TRANS_A ? k * A_LD + m : m * A_LD + k),
                 eb = frag_b[j] + (TRANS_B ? n * B_LD + k : k * B_LD + n);
      s += tile_value(As[ea >> 3], ea, FORMAT_A) * tile_value(Bs[eb >> 3], eb, FORMAT_B);
    }
    acc[(i * TILES_N + j) * TILE_OWNED + e] = s;
  }
}
#define TILE_STORE(t, alpha, to, at)                                                           \
  [[dont_unroll]] for (uint e = 0; e < TILE_OWNED; ++e) to[(at) + tile_lane() + e * LANES] = (alpha) * acc[(t) * TILE_OWNED + e]

#endif
#endif
