#include "ops/precision.h"

#include <bit>

#include "ops/launch_geometry.h"
#include "shaders/precision.h"
#include "util/error.h"

namespace brigade::ops {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::Fp32: return "fp32";
    case Precision::Bf16: return "bf16";
    case Precision::Fp16: return "fp16";
  }
  return "?";
}

Precision parse_precision(const std::string& text) {
  for (Precision p : {Precision::Fp32, Precision::Bf16, Precision::Fp16})
    if (text == precision_name(p)) return p;
  throw UserError("unknown `precision` '" + text + "'; expected fp32, bf16, fp16 or auto");
}

std::string format_kernel(const char* name, std::initializer_list<Precision> formats) {
  Precision half = Precision::Fp32;
  for (Precision p : formats) {
    if (!is_half(p)) continue;
    if (is_half(half) && half != p) return std::string(name) + "_half";
    half = p;
  }
  return is_half(half) ? std::string(name) + "_" + precision_name(half) : std::string(name);
}

namespace {

vk::Groups word_groups(uint32_t n) { return capped_groups((uint64_t(n) + 1) / 2, BRIGADE_WG_PRECISION); }

void expect_views(vk::View x, vk::View packed, uint32_t n, Precision p) {
  BRIGADE_EXPECT(is_half(p), "a 16-bit precision to convert to");
  BRIGADE_EXPECT(x.range >= uint64_t(n) * 4 && packed.range >= stored_bytes(n, p),
                 "precision conversion views hold their n values");
}

}  // namespace

void pack(vk::Commands& cmd, vk::View x, vk::View packed, uint32_t n, Precision p, bool round) {
  if (n == 0) return;
  expect_views(x, packed, n, p);
  const bool vec4 = n % 4 == 0 && x.offset % 16 == 0 && packed.offset % 8 == 0;  // a quad: two words
  const vk::Specialization spec = vk::Specialization{}.set(0, uint32_t(p)).set(1, round ? 1 : 0).set(2, vec4);
  cmd.dispatch(cmd.device().kernel("precision_pack", spec), {x, packed}, shaders::PrecisionPush{n},
               vec4 ? capped_groups(n / 4, BRIGADE_WG_PRECISION) : word_groups(n));
}

vk::View pack_into(vk::Commands& cmd, vk::View x, uint32_t n, Precision p, vk::View room) {
  const vk::View packed(*room.buffer, room.offset, stored_bytes(n, p));
  pack(cmd, x, packed, n, p, false);
  return packed;
}

void unpack(vk::Commands& cmd, vk::View packed, vk::View x, uint32_t n, Precision p) {
  if (n == 0) return;
  expect_views(x, packed, n, p);
  cmd.dispatch(cmd.device().kernel("precision_unpack", vk::Specialization{}.set(0, uint32_t(p))), {packed, x},
               shaders::PrecisionPush{n}, word_groups(n));
}

void round_to(vk::Commands& cmd, vk::View x, uint32_t n, Precision p) {
  if (n == 0 || !is_half(p)) return;
  cmd.dispatch(cmd.device().kernel("precision_round", vk::Specialization{}.set(0, uint32_t(p))), {x},
               shaders::PrecisionPush{n}, capped_groups(n, BRIGADE_WG_PRECISION));
}

void unpack_on_host(std::span<const uint32_t> packed, std::span<float> x, Precision p) {
  BRIGADE_EXPECT(is_half(p) && packed.size() * 2 >= x.size(), "a packed tensor holds its values");
  for (size_t i = 0; i < x.size(); ++i) {
    const uint32_t bits = (packed[i / 2] >> (16 * (i % 2))) & 0xFFFFu;
    x[i] = std::bit_cast<float>(shaders::bits_from_half(bits, uint32_t(p)));
  }
}

float round_on_host(float v, Precision p) {
  if (!is_half(p)) return v;
  const uint32_t f = uint32_t(p);
  return std::bit_cast<float>(shaders::bits_from_half(shaders::half_from_bits(std::bit_cast<uint32_t>(v), f), f));
}

}  // namespace brigade::ops
