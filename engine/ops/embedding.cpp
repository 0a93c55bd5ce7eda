#include "ops/embedding.h"

#include <algorithm>
#include <string>

#include "ops/launch_geometry.h"
#include "util/error.h"

namespace brigade::ops {
namespace {

// `what` names the items, `advice` what the user can change.
uint32_t groups_over(uint64_t items, uint32_t per_group, const std::string& what, const std::string& advice) {
  const uint64_t groups = vk::groups_for(items, per_group);
  if (groups > 65535)  // maxComputeWorkGroupCount every device guarantees
    throw UserError("embedding: " + std::to_string(items) + " " + what + " are too many for one dispatch (at most " +
                    std::to_string(65535ull * per_group) + "); " + advice);
  return uint32_t(groups);
}

void validate(uint32_t B, uint32_t T, uint32_t C, uint32_t V) {
  if (!B || !T || !C || !V)
    throw UserError("embedding: a dimension is zero (B " + std::to_string(B) + ", T " +
                    std::to_string(T) + ", C " + std::to_string(C) + ", V " + std::to_string(V) +
                    ")");
}

void require_positions(vk::View wpe, uint32_t T, uint32_t C) {
  if (wpe.range < uint64_t(T) * C * 4)
    throw UserError("embedding: sequences of " + std::to_string(T) + " tokens need " +
                    std::to_string(T) + " position embeddings, '" + wpe.buffer->name() +
                    "' has " + std::to_string(wpe.range / 4 / C) + " (the block size)");
}

}  // namespace

void embedding_forward(vk::Commands& cmd, vk::View tokens, vk::View wte, vk::View wpe,
                       vk::View out, uint32_t B, uint32_t T, uint32_t C, uint32_t V) {
  validate(B, T, C, V);
  require_positions(wpe, T, C);
  BRIGADE_EXPECT_BYTES(tokens, uint64_t(B) * T * 4, "embedding tokens");
  BRIGADE_EXPECT_BYTES(wte, uint64_t(V) * C * 4, "embedding token table");
  BRIGADE_EXPECT_BYTES(out, uint64_t(B) * T * C * 4, "embedding output");
  cmd.dispatch(cmd.device().kernel("embedding_forward"), {tokens, wte, wpe, out},
               shaders::EmbeddingPush{B, T, C, V},
               {groups_over(uint64_t(B) * T, BRIGADE_EMBEDDING_POSITIONS, "tokens in a micro-batch", "use smaller micro-batches")});
}

uint64_t embedding_scratch_floats(uint32_t B, uint32_t T, uint32_t V) { return 2 * uint64_t(V) + uint64_t(B) * T; }

void embedding_backward(vk::Commands& cmd, vk::View dout, vk::View tokens, vk::View dwte,
                        vk::View dwpe, uint32_t B, uint32_t T, uint32_t C, uint32_t V,
                        std::optional<vk::View> scratch, TokenPass pass, uint32_t rows) {
  validate(B, T, C, V);
  require_positions(dwpe, T, C);
  BRIGADE_EXPECT_BYTES(dout, uint64_t(B) * T * C * 4, "embedding output gradient");
  BRIGADE_EXPECT_BYTES(tokens, uint64_t(B) * T * 4, "embedding tokens");
  BRIGADE_EXPECT_BYTES(dwte, uint64_t(V) * C * 4, "embedding token table gradient");
  vk::Device& dev = cmd.device();
  const shaders::EmbeddingPush push{B, T, C, V};
  // Vocabulary rows per invocation: every group of rows scans all B * T tokens once. On a
  // CPU device the scan dominates, so one group covers the byte vocabulary (both gradients
  // at B = 8, T = 1024, C = 128, V = 256 on lavapipe: about 3 ms, against 45 ms with 16
  // rows). A GPU takes one row an invocation: an H200 ran the pass over 32 rows in 4.1 ms of a
  // gpt2-small step (16 x 1024 tokens, 96 workgroups, the rows' sums indexed by the token,
  // so in memory rather than registers) and in 0.40 ms of gpt-mini's 3.7; one row (V times the
  // workgroups, each sum in a register) took 2.72 ms of the gpt2-small step (docs/BENCHMARKS.md,
  // "The H200 a third time" and "a fourth time").
  // On a GPU each row's positions are listed first: the H200 pass over one row an invocation
  // above is a scan of every token by each (row, column), V * C * B * T steps.
  const bool cpu = dev.info().type == VK_PHYSICAL_DEVICE_TYPE_CPU;
  if (pass == TokenPass::Auto) pass = !cpu && scratch && V <= 65535 && !rows ? TokenPass::Lists : TokenPass::Scan;
  if (pass == TokenPass::Lists) {
    BRIGADE_EXPECT(scratch.has_value(), "the embedding's token lists need a scratch");
    BRIGADE_EXPECT_FLOATS(*scratch, embedding_scratch_floats(B, T, V), "embedding token lists");
    BRIGADE_EXPECT(V <= 65535, "the embedding's token lists take at most 65535 vocabulary rows");
    for (uint32_t phase : {0u, 1u})
      cmd.dispatch(dev.kernel("embedding_token_lists", vk::Specialization{}.set(0, phase)), {tokens, *scratch}, push,
                   {V});
    cmd.dispatch(dev.kernel("embedding_backward_lists"), {dout, *scratch, dwte}, push,
                 {groups_over(C, BRIGADE_WG_EMBEDDING_TOKENS, "channels", "use a smaller n_embd"), V});
  } else {
    rows = std::min(V, rows ? rows : cpu ? 256u : 1u);
    // A vocabulary of more than 65535 groups of rows (a GPU's one row, V > 65535): the grid's
    // rows are capped and each workgroup walks the groups in steps of them.
    const vk::Groups token_groups{groups_over(C, BRIGADE_WG_EMBEDDING_TOKENS, "channels", "use a smaller n_embd"), capped_groups(V, rows).x};
    cmd.dispatch(dev.kernel("embedding_backward_tokens", vk::Specialization{}.set(0, rows)),
                 {dout, tokens, dwte}, push, token_groups);
  }
  // T * C is the model's (block size by width), not the micro-batch's: the grid is capped and
  // the kernel walks the rest.
  cmd.dispatch(dev.kernel("embedding_backward_positions"), {dout, dwpe}, push,
               capped_groups(uint64_t(T) * C, BRIGADE_WG_EMBEDDING));
}

}  // namespace brigade::ops
