#version 450
// C[z] = alpha * sum_r op(A[z,r]) op(B[z,r]) (+ bias) (+ C[z] when accumulating), in fp32, for
// z < batch and r < terms (shaders/matmul.h).
//   op(A): (M,K), stored (M,K) or, with TRANS_A, (K,M)
//   op(B): (K,N), stored (K,N) or, with TRANS_B, (N,K)
//   bias:  (N) added to every row, or (M) to every column, as BIAS says (otherwise bound to
//          anything, never read)
//   C:     (M,N)
//   A, B and C stored in fp32, or in 16 bits as FORMAT_* say (the 16-bit builds,
//          shaders/formats.glsl); C may instead hold fp32 values rounded to ROUND_C
//   pre, act: (M,N) like C, for the epilogue (EPILOGUE, shaders/matmul.h): C's product times
//          gelu'(pre), or gelu(C as stored) written to act; or relu(C) stored (no tensor);
//          stored as FORMAT_E says (act a 16-bit C's)
// Register blocking, the CPU devices' tiling (ops::matmul_tiling): each invocation computes a
// TM x TN block from loads straight out of the buffers, vec4 where the launcher proved
// alignment. No barriers, which is what CPU devices like lavapipe need (they run a barrier
// by switching between invocations). GPUs take matmul_shared.comp, the same product staged
// through shared memory.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
#include "matmul.h"
#include "gelu.glsl"
#include "relu.glsl"
#include "formats.glsl"

layout(local_size_x = 8, local_size_y = 8) in;
layout(local_size_x_id = BRIGADE_MATMUL_SPEC_WG_X, local_size_y_id = BRIGADE_MATMUL_SPEC_WG_Y) in;

layout(constant_id = BRIGADE_MATMUL_SPEC_TM) const uint TM = 8;
layout(constant_id = BRIGADE_MATMUL_SPEC_TN) const uint TN = 8;
layout(constant_id = BRIGADE_MATMUL_SPEC_TRANS_A) const bool TRANS_A = false;
layout(constant_id = BRIGADE_MATMUL_SPEC_TRANS_B) const bool TRANS_B = false;
layout(constant_id = BRIGADE_MATMUL_SPEC_VEC4_A) const bool VEC4_A = false;
layout(constant_id = BRIGADE_MATMUL_SPEC_VEC4_B) const bool VEC4_B = false;
layout(constant_id = BRIGADE_MATMUL_SPEC_SUBGROUP) const uint SUBGROUP = 0;
layout(constant_id = BRIGADE_MATMUL_SPEC_BIAS) const uint BIAS = BRIGADE_MATMUL_BIAS_NONE;
layout(constant_id = BRIGADE_MATMUL_SPEC_EPILOGUE) const uint EPILOGUE = BRIGADE_MATMUL_EPILOGUE_NONE;
layout(constant_id = BRIGADE_MATMUL_SPEC_K_TAIL) const bool K_TAIL = false;
layout(constant_id = BRIGADE_MATMUL_SPEC_VEC4_C) const bool VEC4_C = false;
layout(constant_id = BRIGADE_MATMUL_SPEC_CAUSAL) const uint CAUSAL = BRIGADE_MATMUL_CAUSAL_NONE;
BRIGADE_FORMAT(BRIGADE_MATMUL_SPEC_FORMAT_A, FORMAT_A);
BRIGADE_FORMAT(BRIGADE_MATMUL_SPEC_FORMAT_B, FORMAT_B);
BRIGADE_FORMAT(BRIGADE_MATMUL_SPEC_FORMAT_C, FORMAT_C);
BRIGADE_FORMAT(BRIGADE_MATMUL_SPEC_ROUND_C, ROUND_C);
BRIGADE_FORMAT(BRIGADE_MATMUL_SPEC_FORMAT_E, FORMAT_E);
BRIGADE_FORMAT(BRIGADE_MATMUL_SPEC_FORMAT_COPY, FORMAT_COPY);

const uint WG_X = gl_WorkGroupSize.x, WG_Y = gl_WorkGroupSize.y;
const uint BM = WG_Y * TM, BN = WG_X * TN;  // outputs per workgroup
#include "matmul_io.glsl"

float acc[TM * TN];
float av[4 * TM];  // av[kk * TM + i] = op(A)[m0 + i][k + kk]
float bv[4 * TN];  // bv[kk * TN + j] = op(B)[k + kk][n0 + j]


// Rows and columns past the edge are clamped to the last one: their outputs are computed
// from valid data and never stored, so the inner loop needs no bounds checks.

// An A chunk (TM rows of op(A), k..k+3) as TM vec4s: quad v is row v along k or, with
// TRANS_A, four rows of op(A) from row k + v / QUADS_M of A's storage (needs TM % 4 == 0).
const uint QUADS_M = (TM + 3) / 4;
vec4 a_quad(uint base, uint m0, uint k, uint v) {
  if (!TRANS_A) {
    const uint at = base + min(m0 + v, p.M - 1) * p.lda + k;
    if (VEC4_A) return fetch_a4(at >> 2);
    return vec4(fetch_a(at), fetch_a(at + 1), fetch_a(at + 2), fetch_a(at + 3));
  }
  const uint row = base + (k + v / QUADS_M) * p.lda, i = m0 + 4 * (v % QUADS_M);
  if (VEC4_A) return fetch_a4((row + min(i, p.M - 4)) >> 2);  // M % 4 == 0
  return vec4(fetch_a(row + min(i, p.M - 1)), fetch_a(row + min(i + 1, p.M - 1)),
              fetch_a(row + min(i + 2, p.M - 1)), fetch_a(row + min(i + 3, p.M - 1)));
}

void put_a_quad(uint v, vec4 q) {
  if (!TRANS_A) {
    av[v] = q.x, av[TM + v] = q.y, av[2 * TM + v] = q.z, av[3 * TM + v] = q.w;
  } else {
    const uint at = (v / QUADS_M) * TM + 4 * (v % QUADS_M);
    av[at] = q.x, av[at + 1] = q.y, av[at + 2] = q.z, av[at + 3] = q.w;
  }
}

// With `share`, the lanes of a subgroup compute the same rows: each loads a few of the
// chunk's quads and subgroupBroadcast hands every quad to all. On CPU devices a load costs
// a loop over the lanes and a broadcast a single shuffle.
const uint SG1 = SUBGROUP == 0 ? 1 : SUBGROUP;
void load_a_chunk(uint base, uint m0, uint k, uint depth, bool share) {
  if (depth == 4 && share) {
    vec4 mine[(TM + SG1 - 1) / SG1];
    [[unroll]] for (uint r = 0; r < (TM + SG1 - 1) / SG1; ++r)
      mine[r] = a_quad(base, m0, k, min(r * SG1 + gl_SubgroupInvocationID, TM - 1));
    [[unroll]] for (uint v = 0; v < TM; ++v) put_a_quad(v, subgroupBroadcast(mine[v / SG1], v % SG1));
  } else if (depth == 4 && VEC4_A) {
    [[unroll]] for (uint v = 0; v < TM; ++v) put_a_quad(v, a_quad(base, m0, k, v));
  } else if (share) {  // one k at a time, each lane loading a few rows
    [[unroll]] for (uint kk = 0; kk < depth; ++kk) {
      float mine[(TM + SG1 - 1) / SG1];
      [[unroll]] for (uint r = 0; r < (TM + SG1 - 1) / SG1; ++r)
        mine[r] = load_a(base, min(m0 + min(r * SG1 + gl_SubgroupInvocationID, TM - 1), p.M - 1), k + kk);
      [[unroll]] for (uint i = 0; i < TM; ++i) av[kk * TM + i] = subgroupBroadcast(mine[i / SG1], i % SG1);
    }
  } else {
    [[unroll]] for (uint kk = 0; kk < depth; ++kk)
      [[unroll]] for (uint i = 0; i < TM; ++i) av[kk * TM + i] = load_a(base, min(m0 + i, p.M - 1), k + kk);
  }
}

void load_b_chunk(uint base, uint n0, uint k, uint depth) {
  if (VEC4_B && depth == 4 && TRANS_B) {  // rows of B's storage run along k
    [[unroll]] for (uint j = 0; j < TN; ++j) {
      const vec4 v = fetch_b4((base + min(n0 + j, p.N - 1) * p.ldb + k) >> 2);
      bv[j] = v.x, bv[TN + j] = v.y, bv[2 * TN + j] = v.z, bv[3 * TN + j] = v.w;
    }
  } else if (VEC4_B && depth == 4) {  // rows of B run along n, and N % 4 == 0
    [[unroll]] for (uint kk = 0; kk < 4; ++kk)
      [[unroll]] for (uint j = 0; j < TN; j += 4) {
        const vec4 v = fetch_b4((base + (k + kk) * p.ldb + min(n0 + j, p.N - 4)) >> 2);
        bv[kk * TN + j] = v.x, bv[kk * TN + j + 1] = v.y, bv[kk * TN + j + 2] = v.z,
                          bv[kk * TN + j + 3] = v.w;
      }
  } else {
    [[unroll]] for (uint kk = 0; kk < depth; ++kk)
      [[unroll]] for (uint j = 0; j < TN; ++j) bv[kk * TN + j] = load_b(base, k + kk, min(n0 + j, p.N - 1));
  }
}

void multiply(uint depth) {
  [[unroll]] for (uint kk = 0; kk < depth; ++kk)
    [[unroll]] for (uint i = 0; i < TM; ++i)
      [[unroll]] for (uint j = 0; j < TN; ++j) acc[i * TN + j] += av[kk * TM + i] * bv[kk * TN + j];
}

// The block's outputs, alpha * acc, as the store loops below index them.
float result[TM * TN];

// The register variant's block with VEC4_C (the launcher proved N % 4 == 0, TN % 4 == 0 and
// every row of C 16-byte aligned, and so for the bias and the epilogue's tensor): each row's
// TN outputs as TN / 4 vec4s, a quad wholly inside or wholly past N. A quarter of the
// stores, and of the bias's and the epilogue's loads, each a loop over the lanes on CPU
// devices; the same arithmetic in the same order as one by one.
void store_quads(uint m0, uint n0) {
  const uint base = matrix_at(p.offset_c, gl_WorkGroupID.z, p.stride_c, p.head_stride_c), QN = TN / 4;
  vec4 column_bias[(TN + 3) / 4];  // not empty when TN < 4 (then VEC4_C is never set)
  [[unroll]] for (uint q = 0; q < QN; ++q)
    column_bias[q] = BIAS == BRIGADE_MATMUL_BIAS_COLUMNS ? bias4[min(n0 + 4 * q, p.N - 4) >> 2] : vec4(0.0);
  [[dont_unroll]] for (uint i = 0; i < TM; ++i) {
    const uint m = m0 + i;
    if (m >= p.M) break;
    [[unroll]] for (uint q = 0; q < QN; ++q) {
      if (n0 + 4 * q >= p.N) break;
      const uint r = i * TN + 4 * q;
      store_quad(vec4(result[r], result[r + 1], result[r + 2], result[r + 3]), column_bias[q], m,
                 base + m * p.ldc + n0 + 4 * q);
    }
  }
}

// Writes the block, row i at m0 + i, column j at n0 + j. A loop the compiler keeps rolled: unrolled, the TM x TN guarded stores dominate pipeline creation on
// lavapipe (each becomes a loop over the lanes), and they run once per invocation anyway.
void store_block(uint m0, uint n0) {
  [[unroll]] for (uint i = 0; i < TM * TN; ++i) result[i] = p.alpha * acc[i];
  if (VEC4_C) {
    store_quads(m0, n0);
    return;
  }
  const uint base = matrix_at(p.offset_c, gl_WorkGroupID.z, p.stride_c, p.head_stride_c);
  if (PAIRS_C) {
    // A 16-bit C (or C's copy) without whole quads: a row's outputs two at a time, a word each
    // (the launcher proved TN, N, the row starts and C's matrices even).
    [[dont_unroll]] for (uint i = 0; i < TM * TN; i += 2) {
      const uint m = m0 + i / TN, n = n0 + i % TN;
      if (m >= p.M || n >= p.N) continue;
      store_pair(result[i], result[i + 1], m, n, base + m * p.ldc + n);
    }
    return;
  }
  [[dont_unroll]] for (uint i = 0; i < TM * TN; ++i) {
    const uint m = m0 + i / TN, n = n0 + i % TN;
    if (m >= p.M || n >= p.N) continue;
    store_one(result[i], m, n, base + m * p.ldc + n);
  }
}

void register_tiles() {
  // With SUBGROUP, invocations are placed by subgroup so each subgroup's lanes run along N
  // in one row of the workgroup (WG_X % SUBGROUP == 0, full subgroups). A device whose
  // subgroups are another size falls back to the plain placement.
  const bool share = SUBGROUP != 0 && gl_SubgroupSize == SUBGROUP;
  uint x = gl_LocalInvocationID.x, y = gl_LocalInvocationID.y;
  if (share) {
    y = gl_SubgroupID / (WG_X / SG1);
    x = (gl_SubgroupID % (WG_X / SG1)) * SG1 + gl_SubgroupInvocationID;
  }
  // No early exit past the edge: with `share`, every lane's loads are needed.
  const uint m0 = (gl_WorkGroupID.y * WG_Y + y) * TM, n0 = (gl_WorkGroupID.x * WG_X + x) * TN;
  // The span of K this block needs (shaders/matmul.h), the same for every lane of a subgroup
  // that shares A (its lanes share m0), kept to whole chunks of 4 inside [0, K).
  uint k_begin = 0, k_end = p.K;
  if (CAUSAL == BRIGADE_MATMUL_CAUSAL_K_TO_ROW) k_end = min(p.K, (m0 + TM + 3) & ~3u);
  if (CAUSAL == BRIGADE_MATMUL_CAUSAL_K_FROM_ROW) k_begin = min(p.K, m0) & ~3u;
  if (CAUSAL == BRIGADE_MATMUL_CAUSAL_SKIP_ABOVE) {
    // The subgroup's first column when A is shared: a whole subgroup skips or none of it.
    const uint first = share ? n0 - gl_SubgroupInvocationID * TN : n0;
    if (first > m0 + TM - 1) k_end = 0;
  }
  for (uint r = 0; r < p.terms; ++r) {
    const uint term = gl_WorkGroupID.z * p.terms + r;
    const uint abase = matrix_at(p.offset_a, term, p.stride_a, p.head_stride_a),
               bbase = matrix_at(p.offset_b, term, p.stride_b, p.head_stride_b);
    if (VEC4_A || VEC4_B) {
      // Chunks of 4 along K, then, only in pipelines specialized with K_TAIL, the last
      // K % 4 one by one: a second loop body makes pipeline creation slower on lavapipe.
      const uint chunked = K_TAIL ? k_end & ~3u : k_end;
      for (uint k = k_begin; k < chunked; k += 4) {
        load_a_chunk(abase, m0, k, 4, share);
        load_b_chunk(bbase, n0, k, 4);
        multiply(4);
      }
      if (K_TAIL)
        for (uint k = max(chunked, k_begin); k < k_end; ++k) {
          load_a_chunk(abase, m0, k, 1, share);
          load_b_chunk(bbase, n0, k, 1);
          multiply(1);
        }
    } else {
      for (uint k = k_begin; k < k_end; ++k) {
        load_a_chunk(abase, m0, k, 1, share);
        load_b_chunk(bbase, n0, k, 1);
        multiply(1);
      }
    }
  }
  store_block(m0, n0);
}

void main() {
  [[unroll]] for (uint i = 0; i < TM * TN; ++i) acc[i] = 0.0;
  register_tiles();
}
