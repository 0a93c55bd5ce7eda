#include "ops/linear.h"

#include "ops/column_sums.h"
#include "ops/launch_geometry.h"
#include "shaders/matmul.h"

namespace brigade::ops {

void linear_forward(vk::Commands& cmd, vk::View x, vk::View weight, std::optional<vk::View> bias,
                    vk::View y, uint32_t n, uint32_t in, uint32_t out,
                    std::optional<MatmulTiling> tiling, Formats f) {
  matmul(cmd, x, weight, y,
         {.M = n, .N = out, .K = in, .trans_b = true, .a_format = f.x, .b_format = f.w, .c_format = f.y, .tiling = tiling},
         bias);
}

void linear_gelu_forward(vk::Commands& cmd, vk::View x, vk::View weight, vk::View bias, vk::View y,
                         vk::View act, uint32_t n, uint32_t in, uint32_t out, Formats f) {
  matmul(cmd, x, weight, y,
         {.M = n, .N = out, .K = in, .trans_b = true, .epilogue = MatmulParams::Epilogue::Gelu,
          .a_format = f.x, .b_format = f.w, .c_format = f.y, .e_format = f.y},
         bias, act);
}

void linear_relu_forward(vk::Commands& cmd, vk::View x, vk::View weight, std::optional<vk::View> bias,
                         vk::View y, uint32_t n, uint32_t in, uint32_t out, Formats f) {
  matmul(cmd, x, weight, y,
         {.M = n, .N = out, .K = in, .trans_b = true, .epilogue = MatmulParams::Epilogue::Relu,
          .a_format = f.x, .b_format = f.w, .c_format = f.y},
         bias);
}

void linear_backward_data(vk::Commands& cmd, vk::View dy, vk::View weight, vk::View dx,
                          uint32_t n, uint32_t in, uint32_t out,
                          std::optional<MatmulTiling> tiling, Formats f) {
  matmul(cmd, dy, weight, dx,
         {.M = n, .N = in, .K = out, .accumulate = true, .a_format = f.y, .b_format = f.w, .c_round = f.x,
          .tiling = tiling});
}

void linear_backward_weight(vk::Commands& cmd, vk::View dy, vk::View x, vk::View dweight,
                            std::optional<vk::View> dbias, uint32_t n, uint32_t in, uint32_t out,
                            std::optional<MatmulTiling> tiling, Formats f) {
  matmul(cmd, dy, x, dweight,
         {.M = out, .N = in, .K = n, .trans_a = true, .accumulate = true, .a_format = f.y, .b_format = f.x,
          .tiling = tiling});
  if (dbias) {
    BRIGADE_EXPECT(!is_half(f.y), "the bias gradient sums an fp32 dy");
    linear_bias_backward(cmd, dy, *dbias, n, out);
  }
}

void linear_bias_backward(vk::Commands& cmd, vk::View dy, vk::View dbias, uint32_t n, uint32_t out,
                          ColumnWalk walk) {
  if (out == 0) return;
  const bool vec4 = quads(out, {dy, dbias});
  const ColumnSums g(cmd, vec4 ? out / 4 : out, out, n, walk, vk::Specialization().set(0, vec4), 1);
  cmd.dispatch(cmd.device().kernel("linear_bias_backward", g.spec()), {dy, g.into(0, dbias)},
               shaders::LinearBiasPush{n, out}, g.groups());
  g.finish(cmd, {dbias});
}

void linear_relu_backward(vk::Commands& cmd, vk::View y, vk::View dy, vk::View g, vk::View dbias, uint32_t n,
                          uint32_t out, Precision y_format, ColumnWalk walk) {
  if (out == 0 || n == 0) return;
  // A quad of a 16-bit y is two words.
  const bool vec4 = quads(out, {dy, g, dbias}) && y.offset % (is_half(y_format) ? 8 : 16) == 0;
  const ColumnSums c(cmd, vec4 ? out / 4 : out, out, n, walk,
                     vk::Specialization().set(0, vec4).set(3, uint32_t(y_format)), 1);
  cmd.dispatch(cmd.device().kernel(format_kernel("linear_relu_backward", {y_format}), c.spec()),
               {y, dy, g, c.into(0, dbias)}, shaders::LinearBiasPush{n, out}, c.groups());
  c.finish(cmd, {dbias});
}

}  // namespace brigade::ops
