// A captured product's operands for `bench products`: buffers laid out as its views were in
// the step, filled with values of each one's format, run under any tiling from the same first C.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "ops/product_capture.h"
#include "product_check.h"
#include "vk/buffer.h"
#include "vk/commands.h"

namespace brigade::cli {

// A product's buffers, laid out as its views were in the step (their offsets' alignment), filled
// with values in [-1, 1) of each one's format; C's first values kept to start every check from.
class Operands {
 public:
  Operands(vk::Device& dev, const ops::CapturedProduct& c);
  void record(vk::Commands& cmd, const ops::MatmulParams& p) const;
  // C's values after one run of the product from its first values, from the start of C's view.
  std::vector<float> run_once(vk::Device& dev, const ops::MatmulParams& p, std::optional<vk::View> workspace) const;
  // The operands as stored (C as it starts every run), for the double sum of one element.
  HostOperands host(const ops::MatmulParams& p) const;

 private:
  std::vector<float> widen(size_t i, std::span<const uint32_t> words) const;  // buffer i's values from its view
  std::vector<std::unique_ptr<vk::Buffer>> buffers_;
  std::vector<vk::View> views_;  // A, B, C, then the bias, epilogue tensor and copy where present
  std::vector<ops::Precision> formats_;  // each buffer's
  std::optional<vk::View> bias_, epilogue_, copy_;
  std::vector<uint32_t> c_words_;
};

}  // namespace brigade::cli
