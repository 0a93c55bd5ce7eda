// What the matrix-unit kernels (matmul_tiles.comp, attention_tiles_forward.comp) share around
// their tile operations: the two builds, the element type, and how a workgroup splits into
// warps.
//   BRIGADE_COOPMAT: cooperative matrices (GL_KHR_cooperative_matrix) of ELEM (float16_t, or
//     bfloat16_t with BRIGADE_BF16) with fp32 accumulators, each held by one subgroup; built
//     by .toolchain/bin/glslang (tools/install-glslang.sh). A warp is a subgroup.
//   otherwise: the same operations on plain invocations, for devices without matrix units and
//     for tests: a warp is LANES consecutive invocations.
// Needs LANES before it.
#ifndef BRIGADE_SHADERS_WARPS_GLSL
#define BRIGADE_SHADERS_WARPS_GLSL

// Loops the kernels unroll on GPUs and keep rolled on plain invocations: CPU drivers compile
// a pipeline when it is first dispatched, and unrolled they take minutes over it.
#ifdef BRIGADE_COOPMAT
#define STAGE_LOOP [[unroll]]
#else
#define STAGE_LOOP [[dont_unroll]]
#endif

#ifdef BRIGADE_COOPMAT
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#ifdef BRIGADE_BF16
#extension GL_EXT_bfloat16 : require
#define ELEM bfloat16_t
#else
#define ELEM float16_t
#endif
uint tile_warp() { return gl_SubgroupID; }
uint tile_lane() { return gl_SubgroupInvocationID; }
#else
uint tile_warp() { return gl_LocalInvocationIndex / LANES; }
uint tile_lane() { return gl_LocalInvocationIndex % LANES; }
#endif

// Orders a warp's own accesses to shared memory (its tiles' stores, its lanes' loads and
// stores): a subgroup's barrier where a warp is a subgroup, the workgroup's elsewhere. Other
// warps run on, so it orders nothing they share.
#ifdef BRIGADE_COOPMAT
#define WARP_SYNC()              \
  subgroupMemoryBarrierShared(); \
  subgroupBarrier()
#else
#define WARP_SYNC() barrier()
#endif

// The value of the 16-bit element e of a shared tile of uvec4s, from the uvec4 that holds it
// (shaders/formats.glsl's half_in).
float tile_value(uvec4 eight, uint e, uint format) { return half_in(eight[(e >> 1) & 3u], e, format); }

#endif
