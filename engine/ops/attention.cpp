#include "ops/attention.h"

#include <cmath>
#include <initializer_list>
#include <string>

// Angle brackets: a quoted name would find ops/attention.h beside this file, not the
// shader header in shaders/.
#include "shaders/attention.h"
#include "vk/check.h"

namespace brigade::ops {
namespace {

using shaders::AttentionPush;

// Head size, after checking the shape a model configuration could get wrong.
uint32_t head_size(uint32_t C, uint32_t NH) {
  if (NH == 0 || C == 0 || C % NH != 0)
    throw UserError("attention: the embedding width C=" + std::to_string(C) +
                    " must be a positive multiple of the number of heads NH=" + std::to_string(NH));
  const uint32_t HS = C / NH;
  if (HS > BRIGADE_ATTENTION_MAX_HS)
    throw UserError("attention: head size C/NH=" + std::to_string(HS) + " is over the kernels' " +
                    "limit of " + std::to_string(BRIGADE_ATTENTION_MAX_HS) + "; use more heads");
  return HS;
}

// Whether head rows can be read as vec4s: HS a multiple of 4 and every view 16-byte aligned.
uint32_t aligned(uint32_t HS, std::initializer_list<vk::View> views) {
  bool ok = HS % 4 == 0;
  for (const vk::View& v : views) ok = ok && v.offset % 16 == 0;
  return ok;
}

AttentionPush push(uint32_t B, uint32_t T, uint32_t C, uint32_t NH, uint32_t HS) {
  return {B, T, C, NH, 1.0f / std::sqrt(float(HS))};
}

}  // namespace

void attention_forward(vk::Commands& cmd, vk::View qkv, vk::View y, vk::View lse, uint32_t B,
                       uint32_t T, uint32_t C, uint32_t NH) {
  const uint32_t HS = head_size(C, NH);
  const uint64_t rows = uint64_t(B) * T;
  BRIGADE_EXPECT_FLOATS(qkv, rows * 3 * C, "attention qkv");
  BRIGADE_EXPECT_FLOATS(y, rows * C, "attention y");
  BRIGADE_EXPECT_FLOATS(lse, rows * NH, "attention lse");
  vk::Specialization spec;
  spec.set(BRIGADE_ATTENTION_SPEC_HS, HS);
  spec.set(BRIGADE_ATTENTION_SPEC_VEC4, aligned(HS, {qkv, y}));
  cmd.dispatch(cmd.device().kernel("attention_forward", spec), {qkv, y, lse},
               push(B, T, C, NH, HS), {vk::groups_for(T, BRIGADE_WG_ATTENTION), NH, B});
}

void attention_backward(vk::Commands& cmd, vk::View qkv, vk::View y, vk::View lse, vk::View dy,
                        vk::View dqkv, vk::View delta, uint32_t B, uint32_t T, uint32_t C,
                        uint32_t NH) {
  const uint32_t HS = head_size(C, NH);
  const uint64_t rows = uint64_t(B) * T;
  BRIGADE_EXPECT_FLOATS(qkv, rows * 3 * C, "attention qkv");
  BRIGADE_EXPECT_FLOATS(y, rows * C, "attention y");
  BRIGADE_EXPECT_FLOATS(lse, rows * NH, "attention lse");
  BRIGADE_EXPECT_FLOATS(dy, rows * C, "attention dy");
  BRIGADE_EXPECT_FLOATS(dqkv, rows * 3 * C, "attention dqkv");
  BRIGADE_EXPECT_FLOATS(delta, rows * NH, "attention delta");
  vk::Specialization spec;
  spec.set(BRIGADE_ATTENTION_SPEC_HS, HS);
  spec.set(BRIGADE_ATTENTION_SPEC_VEC4, aligned(HS, {qkv, y, dy, dqkv}));
  const AttentionPush p = push(B, T, C, NH, HS);
  const vk::Groups groups{vk::groups_for(T, BRIGADE_WG_ATTENTION), NH, B};
  // dq first: it also writes delta, which the key/value pass reads (a barrier follows).
  cmd.dispatch(cmd.device().kernel("attention_backward_query", spec), {qkv, y, lse, dy, dqkv, delta},
               p, groups);
  cmd.dispatch(cmd.device().kernel("attention_backward_key_value", spec), {qkv, lse, dy, dqkv, delta},
               p, groups);
}

}  // namespace brigade::ops
