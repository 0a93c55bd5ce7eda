// The CPU reference of nanoGPT's Block as Brigade's two layers, model::GptAttention and
// model::GptMlp, composed from the engine/ref kernels in the order the Block runs them,
// templated on the scalar so the finite-difference check can run it in double. Parameters are
// in each layer's params() order.
#pragma once

#include <cstdint>
#include <vector>

#include "ref/activation.h"
#include "ref/attention.h"
#include "ref/layernorm.h"
#include "ref/linear.h"
#include "ref/residual.h"

namespace brigade::test {

template <class R>
using Tensor = std::vector<R>;

struct BlockShape {
  uint32_t B, T, C, NH;
  uint32_t N() const { return B * T; }
};

// The attention half, x1 = x + attn.c_proj(attention(attn.c_attn(ln_1(x)))): every
// intermediate in GptAttention::saved() order, then the output.
template <class R>
struct AttentionForward {
  Tensor<R> ln1, mean1, rstd1, qkv, attn, lse, y;
  std::vector<const Tensor<R>*> saved() const { return {&ln1, &mean1, &rstd1, &qkv, &attn, &lse}; }
};

template <class R>
AttentionForward<R> attention_half_forward(const Tensor<R>& x, const std::vector<Tensor<R>>& p, const BlockShape& s) {
  const uint32_t N = s.N(), C = s.C;
  AttentionForward<R> f{Tensor<R>(N * C), Tensor<R>(N), Tensor<R>(N), Tensor<R>(N * 3 * C),
                        Tensor<R>(N * C), Tensor<R>(N * s.NH), Tensor<R>(N * C)};
  Tensor<R> branch(N * C);
  ref::layernorm_forward(x.data(), p[0].data(), p[1].data(), f.ln1.data(), f.mean1.data(), f.rstd1.data(), N, C);
  ref::linear_forward<R>(f.ln1, p[2], p[3], f.qkv, N, C, 3 * C);
  ref::attention_forward(f.qkv.data(), f.attn.data(), f.lse.data(), s.B, s.T, C, s.NH);
  ref::linear_forward<R>(f.attn, p[4], p[5], branch, N, C, C);
  ref::residual_forward(x.data(), branch.data(), f.y.data(), N * C);
  return f;
}

// dx += dloss/dx and grads[i] += dloss/dparam i, given dy = dloss/dy.
template <class R>
void attention_half_backward(const Tensor<R>& x, const std::vector<Tensor<R>>& p, const AttentionForward<R>& f,
                             const Tensor<R>& dy, Tensor<R>& dx, std::vector<Tensor<R>>& g, const BlockShape& s) {
  const uint32_t N = s.N(), C = s.C;
  Tensor<R> dattn(N * C, R(0)), dqkv(N * 3 * C, R(0)), dln1(N * C, R(0));
  ref::linear_backward_data<R>(dy, p[4], dattn, N, C, C);
  ref::linear_backward_weight<R>(dy, f.attn, g[4], g[5], N, C, C);
  ref::attention_backward(f.qkv.data(), f.attn.data(), f.lse.data(), dattn.data(), dqkv.data(), s.B, s.T, C, s.NH);
  ref::linear_backward_data<R>(dqkv, p[2], dln1, N, C, 3 * C);
  ref::linear_backward_weight<R>(dqkv, f.ln1, g[2], g[3], N, C, 3 * C);
  for (size_t i = 0; i < dx.size(); ++i) dx[i] += dy[i];
  ref::layernorm_backward_data(dln1.data(), x.data(), p[0].data(), f.mean1.data(), f.rstd1.data(), dx.data(), N, C);
  ref::layernorm_backward_weight(dln1.data(), x.data(), f.mean1.data(), f.rstd1.data(), g[0].data(), g[1].data(),
                                 N, C);
}

// The MLP half, y = x1 + mlp.c_proj(gelu(mlp.c_fc(ln_2(x1)))): every intermediate in
// GptMlp::saved() order, then the output.
template <class R>
struct MlpForward {
  Tensor<R> ln2, mean2, rstd2, fc, gelu, y;
  std::vector<const Tensor<R>*> saved() const { return {&ln2, &mean2, &rstd2, &fc, &gelu}; }
};

template <class R>
MlpForward<R> mlp_half_forward(const Tensor<R>& x, const std::vector<Tensor<R>>& p, const BlockShape& s) {
  const uint32_t N = s.N(), C = s.C;
  MlpForward<R> f{Tensor<R>(N * C), Tensor<R>(N), Tensor<R>(N), Tensor<R>(N * 4 * C), Tensor<R>(N * 4 * C),
                  Tensor<R>(N * C)};
  Tensor<R> branch(N * C);
  ref::layernorm_forward(x.data(), p[0].data(), p[1].data(), f.ln2.data(), f.mean2.data(), f.rstd2.data(), N, C);
  ref::linear_forward<R>(f.ln2, p[2], p[3], f.fc, N, C, 4 * C);
  ref::gelu_forward(f.fc.data(), f.gelu.data(), N * 4 * C);
  ref::linear_forward<R>(f.gelu, p[4], p[5], branch, N, 4 * C, C);
  ref::residual_forward(x.data(), branch.data(), f.y.data(), N * C);
  return f;
}

template <class R>
void mlp_half_backward(const Tensor<R>& x, const std::vector<Tensor<R>>& p, const MlpForward<R>& f,
                       const Tensor<R>& dy, Tensor<R>& dx, std::vector<Tensor<R>>& g, const BlockShape& s) {
  const uint32_t N = s.N(), C = s.C;
  Tensor<R> dgelu(N * 4 * C, R(0)), dfc(N * 4 * C, R(0)), dln2(N * C, R(0));
  ref::linear_backward_data<R>(dy, p[4], dgelu, N, 4 * C, C);
  ref::linear_backward_weight<R>(dy, f.gelu, g[4], g[5], N, 4 * C, C);
  ref::gelu_backward(f.fc.data(), dgelu.data(), dfc.data(), N * 4 * C);
  ref::linear_backward_data<R>(dfc, p[2], dln2, N, C, 4 * C);
  ref::linear_backward_weight<R>(dfc, f.ln2, g[2], g[3], N, C, 4 * C);
  for (size_t i = 0; i < dx.size(); ++i) dx[i] += dy[i];
  ref::layernorm_backward_data(dln2.data(), x.data(), p[0].data(), f.mean2.data(), f.rstd2.data(), dx.data(), N, C);
  ref::layernorm_backward_weight(dln2.data(), x.data(), f.mean2.data(), f.rstd2.data(), g[0].data(), g[1].data(),
                                 N, C);
}

}  // namespace brigade::test
