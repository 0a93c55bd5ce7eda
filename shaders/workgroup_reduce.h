// Workgroup-wide reductions for kernels that give one row (or one channel) to one
// workgroup: LayerNorm, BatchNorm and cross-entropy. The workgroup width is specialization
// constant 0 (local_size_x_id = 0), chosen per device by the launcher (ops/launch_geometry.h).
//
// Inside a subgroup the reductions use subgroup arithmetic, which needs no barrier. Only a
// workgroup of several subgroups combines their partials through shared memory, at the
// cost of two barriers per reduction. Launchers give CPU devices (lavapipe) a single
// subgroup per workgroup, since there each barrier switches between all invocations; GPUs
// get wider workgroups, where barriers are cheap and more lanes share a row.
//
// A .comp that includes this must enable GL_KHR_shader_subgroup_basic and
// GL_KHR_shader_subgroup_arithmetic first (extension directives must precede declarations).
#ifndef BRIGADE_SHADERS_WORKGROUP_REDUCE_H
#define BRIGADE_SHADERS_WORKGROUP_REDUCE_H

// Widest workgroup of the reducing kernels, and the most subgroups it may hold (subgroups
// have at least 4 invocations on the devices Vulkan exposes).
#define BRIGADE_WG_REDUCE_MAX 256
#define BRIGADE_REDUCE_MAX_SUBGROUPS 64

#ifndef __cplusplus

shared float reduce_values[BRIGADE_REDUCE_MAX_SUBGROUPS];
shared uint reduce_indices[2 * BRIGADE_REDUCE_MAX_SUBGROUPS];  // workgroup_argmax: keys, then indices

// A lane's running sum, whether it kept one float or four (a lane that reads vec4s).
float lanes_total(float v) { return v; }
float lanes_total(vec4 v) { return (v.x + v.y) + (v.z + v.w); }

// Each must be called by every invocation of the workgroup (uniform control flow).
float workgroup_sum(float v) {
  v = subgroupAdd(v);
  if (gl_NumSubgroups == 1u) return v;
  if (subgroupElect()) reduce_values[gl_SubgroupID] = v;
  barrier();
  float total = 0.0;
  for (uint s = 0u; s < gl_NumSubgroups; ++s) total += reduce_values[s];
  barrier();  // the next reduction may overwrite reduce_values
  return total;
}

float workgroup_max(float v) {
  v = subgroupMax(v);
  if (gl_NumSubgroups == 1u) return v;
  if (subgroupElect()) reduce_values[gl_SubgroupID] = v;
  barrier();
  float best = reduce_values[0];
  for (uint s = 1u; s < gl_NumSubgroups; ++s) best = max(best, reduce_values[s]);
  barrier();
  return best;
}

// A float's place in torch.argmax's order as an unsigned key: larger values larger keys,
// -0 and +0 equal, every NaN above +inf (torch.argmax returns the first NaN); 0 is below every
// value's key, for a lane without a candidate.
uint argmax_key(float v) {
  if (isnan(v)) return 0xFFFFFFFFu;
  const uint bits = floatBitsToUint(v == 0.0 ? 0.0 : v);
  return (bits & 0x80000000u) != 0u ? ~bits : bits | 0x80000000u;
}

// The smallest index holding the largest key (argmax_key; torch.argmax picks the first
// maximum). Invocations without a candidate pass key 0 and any index.
uint workgroup_argmax(uint key, uint index) {
  const uint best = subgroupMax(key);
  uint first = subgroupMin(key == best ? index : 0xFFFFFFFFu);
  if (gl_NumSubgroups == 1u) return first;
  if (subgroupElect()) {
    reduce_indices[gl_SubgroupID] = best;
    reduce_indices[gl_SubgroupID + gl_NumSubgroups] = first;
  }
  barrier();
  uint top = reduce_indices[0];
  first = reduce_indices[gl_NumSubgroups];
  for (uint s = 1u; s < gl_NumSubgroups; ++s) {
    const uint k = reduce_indices[s], i = reduce_indices[s + gl_NumSubgroups];
    if (k > top || (k == top && i < first)) {
      top = k;
      first = i;
    }
  }
  barrier();
  return first;
}

#endif
#endif
