#version 450
// matmul.comp's product (shaders/matmul.h) on a GPU's SIMT cores: the shared-memory tiling
// (ops::MatmulTiling::Variant::Shared), built as the fast SGEMMs are.
//   - A workgroup of WG_X x WG_Y invocations computes a BM x BN block of C (BM = WG_Y * TM,
//     BN = WG_X * TN); it stages BK-deep tiles of op(A) and op(B) in shared memory, k-major,
//     so an invocation reads its rows and columns as vec4s.
//   - Each invocation holds TM x TN accumulators: rows in groups of four, 4 * WG_Y apart, and
//     columns likewise 4 * WG_X apart, so neighbouring invocations read neighbouring vec4s of
//     the staged tiles and store neighbouring quads of C.
//   - Invocations are placed in 8 x 4 patches (a 32-lane subgroup's), so a subgroup reads 4
//     vec4s of A and 8 of B per k instead of 2 and 16.
//   - Tiles are loaded from memory a quad at a time (vec4 where VEC4_A and VEC4_B say the
//     storage is aligned and the quad lies wholly inside), into registers while the tile
//     before is multiplied, then stored into the other of two shared buffers: one barrier per
//     tile.
// The sums run over K in order, tile after tile, term after term, as in matmul.comp; C and the
// epilogues are stored exactly as matmul.comp stores them (shaders/matmul_io.glsl).
// Needs TM, TN and BK multiples of 4 (the launcher checks).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "matmul.h"
#include "gelu.glsl"
#include "relu.glsl"
#include "formats.glsl"

layout(local_size_x = 16, local_size_y = 16) in;
layout(local_size_x_id = BRIGADE_MATMUL_SPEC_WG_X, local_size_y_id = BRIGADE_MATMUL_SPEC_WG_Y) in;

layout(constant_id = BRIGADE_MATMUL_SPEC_TM) const uint TM = 8;
layout(constant_id = BRIGADE_MATMUL_SPEC_TN) const uint TN = 8;
layout(constant_id = BRIGADE_MATMUL_SPEC_BK) const uint BK = 16;
layout(constant_id = BRIGADE_MATMUL_SPEC_TRANS_A) const bool TRANS_A = false;
layout(constant_id = BRIGADE_MATMUL_SPEC_TRANS_B) const bool TRANS_B = false;
layout(constant_id = BRIGADE_MATMUL_SPEC_VEC4_A) const bool VEC4_A = false;
layout(constant_id = BRIGADE_MATMUL_SPEC_VEC4_B) const bool VEC4_B = false;
layout(constant_id = BRIGADE_MATMUL_SPEC_BIAS) const uint BIAS = BRIGADE_MATMUL_BIAS_NONE;
layout(constant_id = BRIGADE_MATMUL_SPEC_EPILOGUE) const uint EPILOGUE = BRIGADE_MATMUL_EPILOGUE_NONE;
layout(constant_id = BRIGADE_MATMUL_SPEC_VEC4_C) const bool VEC4_C = false;
layout(constant_id = BRIGADE_MATMUL_SPEC_CAUSAL) const uint CAUSAL = BRIGADE_MATMUL_CAUSAL_NONE;
BRIGADE_FORMAT(BRIGADE_MATMUL_SPEC_FORMAT_A, FORMAT_A);
BRIGADE_FORMAT(BRIGADE_MATMUL_SPEC_FORMAT_B, FORMAT_B);
BRIGADE_FORMAT(BRIGADE_MATMUL_SPEC_FORMAT_C, FORMAT_C);
BRIGADE_FORMAT(BRIGADE_MATMUL_SPEC_ROUND_C, ROUND_C);
BRIGADE_FORMAT(BRIGADE_MATMUL_SPEC_FORMAT_E, FORMAT_E);
BRIGADE_FORMAT(BRIGADE_MATMUL_SPEC_FORMAT_COPY, FORMAT_COPY);

const uint WG_X = gl_WorkGroupSize.x, WG_Y = gl_WorkGroupSize.y, THREADS = WG_X * WG_Y;
const uint BM = WG_Y * TM, BN = WG_X * TN;
#include "matmul_io.glsl"
#include "staging.glsl"

// Staged tiles, two of each: As[buffer][k][m] and Bs[buffer][k][n] as vec4s along m and n,
// rows SA and SB vec4s apart (one vec4 of padding spreads a row's transposed stores over
// the banks).
const uint SA = BM / 4 + 1, SB = BN / 4 + 1;
shared vec4 As[2 * BK * SA];
shared vec4 Bs[2 * BK * SB];

// Stores next_a and next_b into shared buffer `buf`: a quad along m or n as one vec4, one
// along k as a component of four.
void stage_tile(uint buf) {
  [[unroll]] for (uint r = 0; r < QA; ++r) {
    const uint q = gl_LocalInvocationIndex + r * THREADS;
    if (q >= BM * BK / RUN) break;
    const uvec2 at = a_run_at(q);
    const uint row = buf * BK * SA + at.y * SA + at.x / 4;
    if (TRANS_A) As[row] = next_a[r];
    else [[unroll]] for (uint c = 0; c < 4; ++c) As[row + c * SA][at.x % 4] = next_a[r][c];
  }
  [[unroll]] for (uint r = 0; r < QB; ++r) {
    const uint q = gl_LocalInvocationIndex + r * THREADS;
    if (q >= BN * BK / RUN) break;
    const uvec2 at = b_run_at(q);
    const uint row = buf * BK * SB + at.x * SB + at.y / 4;
    if (!TRANS_B) Bs[row] = next_b[r];
    else [[unroll]] for (uint c = 0; c < 4; ++c) Bs[row + c * SB][at.y % 4] = next_b[r][c];
  }
}

float acc[TM * TN];
// alpha * acc, for the store loop, which the compiler keeps rolled: an array indexed by a
// loop's counter leaves registers, so the accumulators are copied out of them once.
float result[TM * TN];

void main() {
  // The invocation's place (tx, ty) in the workgroup: 8 x 4 patches of 32 consecutive
  // invocations where the workgroup divides into them, row by row otherwise.
  const uint t = gl_LocalInvocationIndex;
  const bool patches = WG_X % 8 == 0 && WG_Y % 4 == 0;
  const uint square = t / 32, lane = t % 32;
  const uint tx = patches ? (square % (WG_X / 8)) * 8 + lane % 8 : t % WG_X;
  const uint ty = patches ? (square / (WG_X / 8)) * 4 + lane / 8 : t / WG_X;
  const uvec2 block = block_at();
  const uint mb = block.x * BM, nb = block.y * BN;
  [[unroll]] for (uint i = 0; i < TM * TN; ++i) acc[i] = 0.0;

  // The tiles of each term this block needs, then all terms' in turn (a tile lies within one term).
  const uvec2 range = needed_tiles(mb, nb);
  const uint tiles = range.y - range.x, steps = p.terms * tiles;
  if (steps > 0) {
    load_tile(gl_WorkGroupID.z * p.terms, range.x * BK, mb, nb);
    stage_tile(0);
  }
  barrier();
  for (uint s = 0; s < steps; ++s) {
    const uint buf = s % 2;
    if (s + 1 < steps)  // in flight while this tile multiplies
      load_tile(gl_WorkGroupID.z * p.terms + (s + 1) / tiles, (range.x + (s + 1) % tiles) * BK, mb, nb);
    // Four k a pass: on a GPU, 4 TM TN multiply-adds between branches; CPU drivers, which
    // compile a pipeline when it is first dispatched, take seconds over the whole tile unrolled.
    [[dont_unroll]] for (uint k4 = 0; k4 < BK; k4 += 4)
      [[unroll]] for (uint u = 0; u < 4; ++u) {
        const uint kk = k4 + u;
        vec4 a[TM / 4], b[TN / 4];
        [[unroll]] for (uint g = 0; g < TM / 4; ++g) a[g] = As[buf * BK * SA + kk * SA + g * WG_Y + ty];
        [[unroll]] for (uint h = 0; h < TN / 4; ++h) b[h] = Bs[buf * BK * SB + kk * SB + h * WG_X + tx];
        [[unroll]] for (uint i = 0; i < TM; ++i)
          [[unroll]] for (uint j = 0; j < TN; ++j) acc[i * TN + j] += a[i / 4][i % 4] * b[j / 4][j % 4];
      }
    if (s + 1 < steps) stage_tile(1 - buf);  // last read before the barrier that ended step s - 1
    barrier();
  }

  // Row i at mb + (i / 4) * 4 WG_Y + 4 ty + i % 4, quad h of columns at nb + h * 4 WG_X + 4 tx.
  [[unroll]] for (uint i = 0; i < TM * TN; ++i) result[i] = p.alpha * acc[i];
  const uint base = matrix_at(p.offset_c, gl_WorkGroupID.z, p.stride_c, p.head_stride_c);
  [[dont_unroll]] for (uint i = 0; i < TM; ++i) {
    const uint m = mb + (i / 4) * 4 * WG_Y + 4 * ty + i % 4;
    if (m >= p.M) continue;
    [[unroll]] for (uint h = 0; h < TN / 4; ++h) {
      const uint n = nb + h * 4 * WG_X + 4 * tx;
      if (n >= p.N) continue;
      const uint at = base + m * p.ldc + n, r = i * TN + 4 * h;
      const vec4 v = vec4(result[r], result[r + 1], result[r + 2], result[r + 3]);
      if (VEC4_C) {
        store_quad(v, BIAS == BRIGADE_MATMUL_BIAS_COLUMNS ? bias4[n >> 2] : vec4(0.0), m, at);
      } else if (PAIRS_C) {  // N even: a pair wholly inside or past it
        [[unroll]] for (uint c = 0; c < 4; c += 2)
          if (n + c < p.N) store_pair(v[c], v[c + 1], m, n + c, at + c);
      } else {
        [[unroll]] for (uint c = 0; c < 4; ++c)
          if (n + c < p.N) store_one(v[c], m, n + c, at + c);
      }
    }
  }
}
