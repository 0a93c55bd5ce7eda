#include "ops/product_capture.h"

namespace brigade::ops {
namespace {

thread_local ProductCapture* newest = nullptr;

}  // namespace

ProductCapture::ProductCapture() : outer_(newest) { newest = this; }

ProductCapture::~ProductCapture() { newest = outer_; }

ProductCapture* ProductCapture::active() { return newest; }

}  // namespace brigade::ops
