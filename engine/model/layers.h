// The concrete layers models are built from. Each mirrors a PyTorch module (nanoGPT's Block's
// two halves for GptAttention and GptMlp) and names its parameters as that module's state_dict does, after `prefix`
// ("3." for the fourth module of a Sequential, "transformer.h.0." for a GPT block).
// Implementations: layers_dense.cpp (Flatten, Linear, ReLU, GELU), layers_conv.cpp (Conv2d,
// MaxPool2d), layers_norm.cpp (BatchNorm2d, LayerNorm), layers_gpt.cpp (Embedding, LmHead)
// and layers_gpt_block.cpp (GptAttention, GptMlp).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "model/layer.h"
#include "model/operand.h"
#include "ops/conv2d.h"
#include "ops/layernorm.h"

namespace brigade::model {

// The Cost most layers report: `flops` forward per sample, 4 bytes per element of every
// ParamSpec, and 4 bytes per float of the output (none for a view) and of every saved
// tensor's per-sample part.
Cost standard_cost(const Layer& layer, double flops);

// cmd.copy of `floats` floats from src to dst, views of any buffers: how a split backward
// keeps a gradient for backward_params.
void copy_floats(vk::Commands& cmd, vk::View src, vk::View dst, uint64_t floats);

// What a layer's LayerNorm backward writes around its dx (ops::LayerNormGrad): dx =
// `residual` + the LayerNorm's gradient where a residual branch adds one, and dx's copy in x's
// precision where the Cell asks for it (Tensors::dx_copy).
ops::LayerNormGrad input_gradient(const Tensors& t, std::optional<vk::View> residual = std::nullopt);

// A layer whose shapes are fixed at construction.
class ShapedLayer : public Layer {
 public:
  const Shape& input_shape() const override { return input_; }
  const Shape& output_shape() const override { return output_; }

 protected:
  ShapedLayer(Shape input, Shape output) : input_(std::move(input)), output_(std::move(output)) {}
  Shape input_, output_;
};

// nn.Flatten(): [C, H, W] -> [C*H*W], the same memory.
class Flatten final : public ShapedLayer {
 public:
  explicit Flatten(const Shape& input);
  std::string kind() const override { return "flatten"; }
  Cost cost() const override { return standard_cost(*this, 0); }
  bool is_view() const override { return true; }
  void forward(const Pass&, const Tensors&) const override {}
  void backward(const Pass&, const Tensors&, vk::View, std::optional<vk::View>) const override {}
};

// nn.Linear(in_features, out_features, bias) on [..., in_features]. PyTorch's default
// initialization: weight and bias Uniform(-1/sqrt(in), 1/sqrt(in)).
// `relu`: the ReLU layer after it is folded in (ReLU's `folded`): the product's epilogue
// stores relu(y), and backward first masks dy where y is not positive (into the scratch, or
// for a split backward into its deferred dy).
class Linear final : public ShapedLayer {
 public:
  Linear(const Shape& input, uint32_t in_features, uint32_t out_features, bool bias,
         std::string prefix, bool relu = false);
  std::string kind() const override { return "linear"; }
  std::vector<ParamSpec> params() const override;
  bool backward_reads_output() const override { return relu_; }
  bool stores_half(const vk::PhysicalInfo& device) const override;
  bool reads_half_weights() const override { return true; }
  uint64_t scratch_floats(uint32_t rows, ops::Precision stored, bool lean = false) const override;
  uint64_t forward_scratch_floats(uint32_t, ops::Precision, bool = false) const override { return 0; }
  Cost cost() const override;
  void forward(const Pass& p, const Tensors& t) const override;
  // A split backward keeps the output gradient ("dy") for backward_params.
  std::vector<SavedSpec> deferred() const override;
  void backward(const Pass& p, const Tensors& t, vk::View dy,
                std::optional<vk::View> dx) const override;
  void backward_params(const Pass& p, const Tensors& t) const override;

 private:
  Operand product_operand(const Pass& p, const Tensors& t, vk::View g) const;
  // The weight gradient from `product` (g as the products read it), and the bias gradient from
  // g unless `with_bias` is false (taken with the ReLU).
  void backward_weight(const Pass& p, const Tensors& t, vk::View g, const Operand& product, bool with_bias) const;
  uint32_t in_, out_, rows_per_sample_;
  bool bias_;
  std::string prefix_;
  bool relu_;
};

// nn.ReLU(); its backward reads the output.
// `folded`: a neighbour applies it, the MaxPool2d right after it (ops/maxpool2d.h, `relu`),
// or the Conv2d before it together with that MaxPool2d (Conv2d's `pool`), or else the Linear
// right before it (its product's epilogue), so this layer is a view: it computes nothing and
// holds no output (the builder folds every such pair).
class ReLU final : public ShapedLayer {
 public:
  explicit ReLU(const Shape& input, bool folded = false) : ShapedLayer(input, input), folded_(folded) {}
  std::string kind() const override { return "relu"; }
  bool is_view() const override { return folded_; }
  bool backward_reads_input() const override { return false; }
  bool backward_reads_output() const override { return true; }
  bool writes_input_gradient() const override { return true; }
  Cost cost() const override;
  void forward(const Pass& p, const Tensors& t) const override;
  void backward(const Pass& p, const Tensors& t, vk::View dy,
                std::optional<vk::View> dx) const override;

 private:
  bool folded_;
};

// nn.GELU(approximate='tanh'); its backward reads the input.
class GELU final : public ShapedLayer {
 public:
  explicit GELU(const Shape& input) : ShapedLayer(input, input) {}
  std::string kind() const override { return "gelu"; }
  Cost cost() const override;
  void forward(const Pass& p, const Tensors& t) const override;
  void backward(const Pass& p, const Tensors& t, vk::View dy,
                std::optional<vk::View> dx) const override;
};

// nn.Conv2d(in, out, kernel, stride, padding, bias) on [in, H, W]. PyTorch's default
// initialization: Uniform(-1/sqrt(in*k*k), 1/sqrt(in*k*k)).
// `pool`: the ReLU and the MaxPool2d(2) after it are folded in (ops/conv2d_pool.h; both then
// views): the output is the pooled one, the convolution's is not kept, and the layer keeps
// each pooled output's code ("codes") for its backward. With the one-pass kernel the weight
// gradient comes straight from the pooled gradient and the codes; otherwise, and for the
// input gradient, the convolution's passes run on the gradient spread back.
class Conv2d final : public ShapedLayer {
 public:
  Conv2d(const Shape& input, uint32_t in_channels, uint32_t out_channels, uint32_t kernel,
         uint32_t stride, uint32_t padding, bool bias, std::string prefix, bool pool = false);
  std::string kind() const override { return "conv2d"; }
  // Whether the ReLU and pooling after it are folded in (`pool`, where the shape allows).
  bool pools() const { return fold_ != Fold::None; }
  bool stores_half(const vk::PhysicalInfo& device) const override;
  std::vector<ParamSpec> params() const override;
  std::vector<SavedSpec> saved() const override;
  Cost cost() const override;
  void forward(const Pass& p, const Tensors& t) const override;
  // A split backward keeps the output gradient ("dy") for backward_params.
  std::vector<SavedSpec> deferred() const override;
  void backward(const Pass& p, const Tensors& t, vk::View dy,
                std::optional<vk::View> dx) const override;
  void backward_params(const Pass& p, const Tensors& t) const override;
  // The scratch of the matrix form (ops/conv2d.h), its columns or Winograd's tiles: every
  // sample's, up to kScratchCap bytes; past the cap the passes work through the samples in
  // chunks (one sample at least).
  uint64_t scratch_floats(uint32_t rows, ops::Precision stored, bool lean = false) const override;
  // The patch fold's forward takes none (its kernel pools straight from the input patches).
  uint64_t forward_scratch_floats(uint32_t rows, ops::Precision stored, bool lean = false) const override;
  static constexpr uint64_t kScratchCap = 32ull << 20;

 private:
  // dweight (and dbias) += the gradient from dy (the output gradient, pooled with a fold).
  void backward_weight(const Pass& p, const Tensors& t, vk::View dy) const;
  ops::Formats formats(const Tensors& t) const;
  ops::Conv2dShape shape(uint32_t rows) const;
  uint32_t in_, out_, kernel_, stride_, padding_;
  bool bias_;
  std::string prefix_;
  // How the ReLU and pooling are folded in (ops/conv2d_pool.h): the one-pass kernel on the
  // input patches where the convolution fits in registers, else the convolution's own form
  // with the pooling on tiles of its output.
  enum class Fold { None, Patch, Tiles };
  Fold fold_ = Fold::None;
};

// nn.MaxPool2d(kernel, stride) on [C, H, W].
// `relu_first`: the ReLU layer before it is folded in (ReLU's `folded`).
// `folded`: the Conv2d before the ReLU applies both (Conv2d's `pool`), so this layer is a
// view of its input, already pooled.
class MaxPool2d final : public ShapedLayer {
 public:
  MaxPool2d(const Shape& input, uint32_t kernel, uint32_t stride, bool relu_first = false, bool folded = false);
  std::string kind() const override { return "maxpool2d"; }
  bool is_view() const override { return folded_; }
  bool writes_input_gradient() const override { return true; }
  bool stores_half(const vk::PhysicalInfo& device) const override;
  Cost cost() const override;
  void forward(const Pass& p, const Tensors& t) const override;
  void backward(const Pass& p, const Tensors& t, vk::View dy,
                std::optional<vk::View> dx) const override;

 private:
  uint32_t kernel_, stride_;
  bool relu_first_, folded_;
};

// nn.BatchNorm2d(C) on [C, H, W] with GPipe's statistics (ops/batchnorm.h): each training
// micro-batch is normalized with its own statistics, which also go into the "stats"
// accumulator; end_minibatch moves the running statistics once per mini-batch.
// Params: weight, bias (Trainable), running_mean, running_var (Buffer), stats (State).
// Saved: the micro-batch's per-channel mean and rstd (fp32 in every precision). Its kernels
// take 16-bit tensors where H * W is even.
// No split backward: its fused kernel needs the parameter-gradient sums to form dx.
class BatchNorm2d final : public ShapedLayer {
 public:
  BatchNorm2d(const Shape& input, uint32_t features, std::string prefix);
  std::string kind() const override { return "batchnorm2d"; }
  bool writes_input_gradient() const override { return true; }
  bool stores_half(const vk::PhysicalInfo& device) const override;
  std::vector<ParamSpec> params() const override;
  std::vector<SavedSpec> saved() const override;
  Cost cost() const override;
  void forward(const Pass& p, const Tensors& t) const override;
  void backward(const Pass& p, const Tensors& t, vk::View dy,
                std::optional<vk::View> dx) const override;
  void end_minibatch(vk::Commands& cmd, std::span<const vk::View> params) const override;

 private:
  uint32_t channels_, plane_;  // plane_ = H * W
  std::string prefix_;
};

// nn.LayerNorm(C) on [..., C]. Saved: each row's mean and rstd.
class LayerNorm final : public ShapedLayer {
 public:
  LayerNorm(const Shape& input, uint32_t features, std::string prefix);
  std::string kind() const override { return "layernorm"; }
  bool writes_input_gradient_copy() const override { return true; }
  bool stores_half(const vk::PhysicalInfo& device) const override;
  std::vector<ParamSpec> params() const override;
  std::vector<SavedSpec> saved() const override;
  Cost cost() const override;
  void forward(const Pass& p, const Tensors& t) const override;
  // A split backward keeps the output gradient ("dy") for backward_params.
  std::vector<SavedSpec> deferred() const override;
  void backward(const Pass& p, const Tensors& t, vk::View dy,
                std::optional<vk::View> dx) const override;
  void backward_params(const Pass& p, const Tensors& t) const override;

 private:
  uint32_t channels_, rows_per_sample_;
  std::string prefix_;
};

// The standard deviation of nanoGPT's normal initialisation (_init_weights).
inline constexpr float kGptStd = 0.02f;

// nanoGPT's token and position embeddings, transformer.wte and transformer.wpe: [T] int32
// token ids -> [T, C]. Both tables start Normal(0, 0.02).
// No split backward: it is only ever a model's first layer, whose backward nobody waits for.
class Embedding final : public ShapedLayer {
 public:
  Embedding(uint32_t vocab_size, uint32_t block_size, uint32_t T, uint32_t C);
  std::string kind() const override { return "embedding"; }
  std::vector<ParamSpec> params() const override;
  Cost cost() const override;
  bool integer_input() const override { return true; }
  // A GPU's token gradient lists each vocabulary row's positions there (ops::TokenPass).
  uint64_t scratch_floats(uint32_t rows, ops::Precision stored, bool lean = false) const override;
  uint64_t forward_scratch_floats(uint32_t, ops::Precision, bool = false) const override { return 0; }
  void forward(const Pass& p, const Tensors& t) const override;
  // Token ids have no gradient: dx is ignored.
  void backward(const Pass& p, const Tensors& t, vk::View dy,
                std::optional<vk::View> dx) const override;

 private:
  uint32_t vocab_, block_size_, T_, C_;
};

// nanoGPT's lm_head: [T, C] -> [T, V] logits = x wte^T, no bias. Its weight is
// transformer.wte.weight, tied to Embedding's: a stage holding both gives them one buffer,
// and both backward passes add into its one gradient.
class LmHead final : public ShapedLayer {
 public:
  LmHead(uint32_t T, uint32_t C, uint32_t vocab_size);
  std::string kind() const override { return "lm_head"; }
  bool stores_half(const vk::PhysicalInfo& device) const override;
  bool reads_half_weights() const override { return true; }
  std::vector<ParamSpec> params() const override;
  Cost cost() const override;
  void forward(const Pass& p, const Tensors& t) const override;
  // A split backward keeps the output gradient ("dy") for backward_params.
  std::vector<SavedSpec> deferred() const override;
  void backward(const Pass& p, const Tensors& t, vk::View dy,
                std::optional<vk::View> dx) const override;
  void backward_params(const Pass& p, const Tensors& t) const override;
  uint64_t scratch_floats(uint32_t rows, ops::Precision stored, bool lean = false) const override;
  uint64_t forward_scratch_floats(uint32_t, ops::Precision, bool = false) const override { return 0; }

 private:
  Operand product_operand(const Pass& p, const Tensors& t, vk::View dy) const;
  void backward_weight(const Pass& p, const Tensors& t, const Operand& product) const;
  uint32_t T_, C_, vocab_;
};

// nanoGPT's Block (bias, no dropout) on [T, C] as two layers, so that a pipeline can cut
// between them:
//   GptAttention  x1 = x + attn.c_proj(attention(attn.c_attn(ln_1(x))))
//   GptMlp        y  = x1 + mlp.c_proj(gelu(mlp.c_fc(ln_2(x1))))
// Parameters "transformer.h.{index}.*" in nanoGPT's order; Linear weights start
// Normal(0, 0.02), the two c_proj weights Normal(0, 0.02 / sqrt(2 * n_layer)). Each writes its
// input gradient through its LayerNorm's backward, the residual added there (dx = dy + the
// branch's gradient), and its copy packed where the Cell asks for one.
class GptHalf : public ShapedLayer {
 public:
  bool writes_input_gradient() const override { return true; }
  bool writes_input_gradient_copy() const override { return true; }
  bool reads_output_gradient_copy() const override { return true; }
  bool reads_half_weights() const override { return true; }

 protected:
  GptHalf(uint32_t index, uint32_t T, uint32_t C, uint32_t n_head, uint32_t n_layer);
  // "transformer.h.{index}." and the c_proj weights' standard deviation.
  std::string prefix() const;
  float proj_std() const;
  uint32_t index_, T_, C_, NH_, n_layer_;
};

class GptAttention final : public GptHalf {
 public:
  GptAttention(uint32_t index, uint32_t T, uint32_t C, uint32_t n_head, uint32_t n_layer);
  std::string kind() const override { return "gpt_attention"; }
  bool stores_half(const vk::PhysicalInfo& device) const override;
  std::vector<ParamSpec> params() const override;
  std::vector<SavedSpec> saved() const override;
  uint64_t scratch_floats(uint32_t rows, ops::Precision stored, bool lean = false) const override;
  uint64_t forward_scratch_floats(uint32_t rows, ops::Precision stored, bool lean = false) const override;
  uint8_t lean_scratch(const vk::PhysicalInfo& device) const override;
  Cost cost() const override;
  void forward(const Pass& p, const Tensors& t) const override;
  // A split backward keeps dy (attn.c_proj), dqkv (attn.c_attn) and dln_1.
  std::vector<SavedSpec> deferred() const override;
  void backward(const Pass& p, const Tensors& t, vk::View dy, std::optional<vk::View> dx) const override;
  void backward_params(const Pass& p, const Tensors& t) const override;
};

class GptMlp final : public GptHalf {
 public:
  GptMlp(uint32_t index, uint32_t T, uint32_t C, uint32_t n_layer);
  std::string kind() const override { return "gpt_mlp"; }
  bool stores_half(const vk::PhysicalInfo& device) const override;
  std::vector<ParamSpec> params() const override;
  std::vector<SavedSpec> saved() const override;
  uint64_t scratch_floats(uint32_t rows, ops::Precision stored, bool lean = false) const override;
  uint64_t forward_scratch_floats(uint32_t rows, ops::Precision stored, bool lean = false) const override;
  Cost cost() const override;
  void forward(const Pass& p, const Tensors& t) const override;
  // A split backward keeps dy (mlp.c_proj), dfc (mlp.c_fc) and dln_2.
  std::vector<SavedSpec> deferred() const override;
  void backward(const Pass& p, const Tensors& t, vk::View dy, std::optional<vk::View> dx) const override;
  void backward_params(const Pass& p, const Tensors& t) const override;
};

}  // namespace brigade::model
