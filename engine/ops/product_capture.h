// The matrix products a recording asks of ops::matmul, captured as data: `brigade bench
// products` records a model's micro-batch under a capture, then times each product it saw
// alone, under its default tiling and every other, on buffers laid out as the step's were.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ops/matmul.h"

namespace brigade::ops {

// An operand as the product saw it: its view's offset modulo 256 (the alignment its kernel's
// wide loads were chosen by) and the bytes of the view the product reads or writes from there.
struct CapturedOperand {
  uint64_t offset = 0, bytes = 0;
};

struct CapturedProduct {
  MatmulParams params;  // as the caller gave them (a tiling only where the caller fixed one)
  CapturedOperand a, b, c;
  std::optional<CapturedOperand> bias, epilogue, copy;
  MatmulTiling tiling;  // the one ops::matmul took (a tuned one, ops/tuned_tilings.h, where found)
};

// What sets a product apart beyond its shape (product_name): its formats, epilogue, bias,
// accumulation, a tiling its caller fixed ("A bf16, B bf16, GELU, bias").
std::string product_details(const CapturedProduct& c);
// Everything a product's kernel and its time depend on but the tiling: equal keys, one
// product (`bench products` times it once; a tuned tiling is found by it).
std::string product_key(const CapturedProduct& c);

// While one is alive, ops::matmul appends every product recorded on this thread to the
// newest, with the tiling it took (a split K's parts are the one product, not more).
class ProductCapture {
 public:
  ProductCapture();
  ~ProductCapture();
  ProductCapture(const ProductCapture&) = delete;
  ProductCapture& operator=(const ProductCapture&) = delete;

  const std::vector<CapturedProduct>& products() const { return products_; }
  static ProductCapture* active();
  void add(CapturedProduct p) { products_.push_back(std::move(p)); }

 private:
  ProductCapture* outer_;
  std::vector<CapturedProduct> products_;
};

}  // namespace brigade::ops
