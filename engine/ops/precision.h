// Storage precision of activations: fp32, or 16 bits (bf16 or fp16) packed two values to a
// 32-bit word, which every device can store (no 16-bit storage feature needed). Kernels keep
// computing in fp32: some read and write 16-bit tensors themselves (Formats,
// shaders/formats.glsl); around the others a 16-bit tensor is unpacked into fp32 before the
// kernel reads it, and its fp32 result rounded and packed after (pack, unpack below). Either
// way shaders/precision.h rounds, to nearest with ties to even, identically on every device
// and on the CPU.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "vk/commands.h"

namespace brigade::ops {

enum class Precision : uint32_t { Fp32 = 0, Bf16 = 1, Fp16 = 2 };  // = BRIGADE_FORMAT_*

const char* precision_name(Precision p);  // "fp32", "bf16", "fp16"
// "fp32" | "bf16" | "fp16"; throws UserError naming the value otherwise.
Precision parse_precision(const std::string& text);
inline bool is_half(Precision p) { return p != Precision::Fp32; }

// How a layer's input x and output y are stored, for kernels that read and write 16 bits
// themselves (shaders/formats.glsl); their dx then holds fp32 values rounded to x's. w: how
// the weight its products read is stored (a 16-bit stage's copy of it, model::ParamSpec).
struct Formats {
  Precision x = Precision::Fp32, y = Precision::Fp32, w = Precision::Fp32;
};

// The build of kernel `name` for these formats (cmake/shaders.cmake): NAME (with no 16-bit
// code) where all are fp32, NAME_bf16 or NAME_fp16 where one 16-bit type is among them, and
// NAME_half, which holds both, where both are (the first layer of a stage reading the
// boundary of a stage in the other type).
std::string format_kernel(const char* name, std::initializer_list<Precision> formats);

// Bytes of `elements` values stored in `p`: 4 each in fp32, whole words of two in 16 bits.
inline uint64_t stored_bytes(uint64_t elements, Precision p) {
  return is_half(p) ? (elements + 1) / 2 * 4 : elements * 4;
}

// packed = x in 16 bits; with `round`, x is overwritten with the values packed keeps.
// x: (n) floats, packed: stored_bytes(n, p)
void pack(vk::Commands& cmd, vk::View x, vk::View packed, uint32_t n, Precision p, bool round);
// x's n values packed to p (rounded, x left as it is) at the start of `room`; returns that
// view of stored_bytes(n, p): a product's 16-bit operand made from fp32 values.
vk::View pack_into(vk::Commands& cmd, vk::View x, uint32_t n, Precision p, vk::View room);
// x = the values of packed.  packed: stored_bytes(n, p), x: (n) floats
void unpack(vk::Commands& cmd, vk::View packed, vk::View x, uint32_t n, Precision p);
// x = x rounded to p, in place.  x: (n) floats
void round_to(vk::Commands& cmd, vk::View x, uint32_t n, Precision p);

// The same conversions on the host, bit for bit: a 16-bit tensor downloaded as words.
void unpack_on_host(std::span<const uint32_t> packed, std::span<float> x, Precision p);
float round_on_host(float v, Precision p);

}  // namespace brigade::ops
