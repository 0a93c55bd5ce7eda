// What the matrix kernels (matmul.comp, matmul_tiles.comp) share: their bindings and push
// constants, where each matrix of an operand starts, A's, B's and the epilogue's elements as
// stored, and how a product's value becomes C's element (bias, epilogue, accumulation,
// rounding, 16-bit stores). Included after the kernel's specialization constants TRANS_A,
// TRANS_B, BIAS, EPILOGUE and FORMAT_A, _B, _C, _E, _COPY and ROUND_C.
#ifndef BRIGADE_SHADERS_MATMUL_IO_GLSL
#define BRIGADE_SHADERS_MATMUL_IO_GLSL

// Each operand is bound as floats and as vec4 for the aligned loads, and A, B and C as words
// and word pairs where FORMAT_* keeps them in 16 bits (shaders/formats.glsl), A and B also as
// word quads (eight 16-bit elements: the matrix-unit kernel's staging).
layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 0) readonly buffer A4 { vec4 a4[]; };
layout(binding = 0) readonly buffer AW { uint aw[]; };
layout(binding = 0) readonly buffer AW2 { uvec2 aw2[]; };
layout(binding = 0) readonly buffer AW4 { uvec4 aw4[]; };
layout(binding = 1) readonly buffer B { float b[]; };
layout(binding = 1) readonly buffer B4 { vec4 b4[]; };
layout(binding = 1) readonly buffer BW { uint bw[]; };
layout(binding = 1) readonly buffer BW2 { uvec2 bw2[]; };
layout(binding = 1) readonly buffer BW4 { uvec4 bw4[]; };
layout(binding = 2) readonly buffer Bias { float bias[]; };
layout(binding = 2) readonly buffer Bias4 { vec4 bias4[]; };
layout(binding = 3) buffer C { float c[]; };
layout(binding = 3) buffer C4 { vec4 c4[]; };
layout(binding = 3) buffer CW { uint cw[]; };
layout(binding = 3) buffer CW2 { uvec2 cw2[]; };
// The epilogue's tensors, laid out as C (otherwise bound to anything, never touched); binding
// 5 is also where C's 16-bit copy goes (FORMAT_COPY, as words).
layout(binding = 4) readonly buffer Pre { float pre[]; };
layout(binding = 4) readonly buffer Pre4 { vec4 pre4[]; };
layout(binding = 4) readonly buffer PreW { uint prew[]; };
layout(binding = 4) readonly buffer PreW2 { uvec2 prew2[]; };
layout(binding = 5) writeonly buffer Act { float act[]; };
layout(binding = 5) writeonly buffer Act4 { vec4 act4[]; };
layout(binding = 5) writeonly buffer ActW { uint actw[]; };
layout(binding = 5) writeonly buffer ActW2 { uvec2 actw2[]; };
layout(push_constant) uniform Push { MatmulPush p; };

// Whether C's outputs are stored in pairs when not in quads: a 16-bit C, or C's 16-bit copy.
const bool PAIRS_C = FORMAT_C != BRIGADE_FORMAT_FP32 || FORMAT_COPY != BRIGADE_FORMAT_FP32;

// Where matrix i of an operand starts (shaders/matmul.h): uniform across the workgroup.
uint matrix_at(uint offset, uint i, uint stride, uint head_stride) {
  return offset + (i / p.heads) * stride + (i % p.heads) * head_stride;
}

// Element i, and quad q (elements 4q .. 4q + 3), of A and B as stored.
float fetch_a(uint i) {
  if (FORMAT_A == BRIGADE_FORMAT_FP32) return a[i];
  return half_in(aw[i >> 1], i, FORMAT_A);
}
vec4 fetch_a4(uint q) {
  if (FORMAT_A == BRIGADE_FORMAT_FP32) return a4[q];
  return quad_in(aw2[q], FORMAT_A);
}
float fetch_b(uint i) {
  if (FORMAT_B == BRIGADE_FORMAT_FP32) return b[i];
  return half_in(bw[i >> 1], i, FORMAT_B);
}
vec4 fetch_b4(uint q) {
  if (FORMAT_B == BRIGADE_FORMAT_FP32) return b4[q];
  return quad_in(bw2[q], FORMAT_B);
}

// The epilogue's pre at element i, and quad q, as FORMAT_E stores it.
float pre_at(uint i) {
  if (FORMAT_E == BRIGADE_FORMAT_FP32) return pre[i];
  return half_in(prew[i >> 1], i, FORMAT_E);
}
vec4 pre_quad(uint q) {
  if (FORMAT_E == BRIGADE_FORMAT_FP32) return pre4[q];
  return quad_in(prew2[q], FORMAT_E);
}

float load_a(uint base, uint m, uint k) { return fetch_a(base + (TRANS_A ? k * p.lda + m : m * p.lda + k)); }
float load_b(uint base, uint k, uint n) { return fetch_b(base + (TRANS_B ? n * p.ldb + k : k * p.ldb + n)); }

// The value v of C[m][n] (alpha times the product), stored at element `at`: bias, epilogue,
// accumulation and rounding.
float output_value(float v, uint m, uint n, uint at) {
  v = BIAS == BRIGADE_MATMUL_BIAS_COLUMNS ? v + bias[n]
      : BIAS == BRIGADE_MATMUL_BIAS_ROWS  ? v + bias[m]
                                          : v;
  if (EPILOGUE == BRIGADE_MATMUL_EPILOGUE_GELU_GRAD) v *= gelu_grad(pre_at(at));
  if (EPILOGUE == BRIGADE_MATMUL_EPILOGUE_RELU) v = relu(v);
  return rounded(p.accumulate != 0 ? c[at] + v : v, ROUND_C);
}

// An fp32 C's element: C[m][n] at element `at` from the value v.
void store_one(float v, uint m, uint n, uint at) {
  const float stored = output_value(v, m, n, at);
  c[at] = stored;
  if (EPILOGUE == BRIGADE_MATMUL_EPILOGUE_GELU) act[at] = gelu(stored);
}

// C[m][n] and C[m][n + 1] (n even, `at` C[m][n]'s element) from the values lo and hi: a
// 16-bit C's word, or an fp32 C's two elements and their copy's word.
void store_pair(float lo, float hi, uint m, uint n, uint at) {
  lo = output_value(lo, m, n, at), hi = output_value(hi, m, n + 1, at + 1);
  if (FORMAT_C == BRIGADE_FORMAT_FP32) c[at] = lo, c[at + 1] = hi;
  else cw[at >> 1] = pair_out(lo, hi, FORMAT_C);
  if (EPILOGUE == BRIGADE_MATMUL_EPILOGUE_GELU)  // of C as stored, and stored as C
    actw[at >> 1] = pair_out(gelu(rounded(lo, FORMAT_C)), gelu(rounded(hi, FORMAT_C)), FORMAT_E);
  if (FORMAT_COPY != BRIGADE_FORMAT_FP32) actw[at >> 1] = pair_out(lo, hi, FORMAT_COPY);
}

// C[m][n .. n + 3] at element `at` (n % 4 == 0; C, the bias and the epilogue's tensor 16-byte
// aligned there, and all four inside N: the launchers' VEC4_C) from the values v, with
// column_bias the bias's quad at n where BIAS adds one per column (read by the caller, who
// may hoist it out of a loop over rows). The same arithmetic as store_one, four at a time.
void store_quad(vec4 v, vec4 column_bias, uint m, uint at) {
  const uint q = at >> 2;
  if (BIAS == BRIGADE_MATMUL_BIAS_COLUMNS) v += column_bias;
  if (BIAS == BRIGADE_MATMUL_BIAS_ROWS) v += bias[m];
  if (EPILOGUE == BRIGADE_MATMUL_EPILOGUE_GELU_GRAD) v *= gelu_grad(pre_quad(q));
  if (EPILOGUE == BRIGADE_MATMUL_EPILOGUE_RELU) v = relu(v);
  const vec4 stored = rounded(p.accumulate != 0 ? c4[q] + v : v, ROUND_C);
  if (FORMAT_C == BRIGADE_FORMAT_FP32) c4[q] = stored;
  else cw2[q] = quad_out(stored, FORMAT_C);
  if (EPILOGUE == BRIGADE_MATMUL_EPILOGUE_GELU) {  // of C as stored, and stored as C
    const vec4 g = gelu(rounded(stored, FORMAT_C));
    if (FORMAT_E == BRIGADE_FORMAT_FP32) act4[q] = g;
    else actw2[q] = quad_out(g, FORMAT_E);
  }
  if (FORMAT_COPY != BRIGADE_FORMAT_FP32) actw2[q] = quad_out(stored, FORMAT_COPY);
}

#endif
