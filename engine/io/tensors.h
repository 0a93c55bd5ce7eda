// The interop contract's files (DESIGN.md): parameters, gradients and batches as safetensors
// under PyTorch's names and layouts.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/model.h"
#include "pipeline/batch.h"

namespace brigade::io {

// Every parameter the model saves (Trainable and Buffer), each with exactly the model's
// shape and finite values, and nothing else: a missing, misshapen, non-finite or unexpected
// tensor is refused by name. A checkpoint's optimizer state ("optimizer.*") and
// "*.num_batches_tracked" are skipped.
std::map<std::string, std::vector<float>> read_parameters(const SafeTensors& file,
                                                          const model::Model& m);
// UserError "<what> holds N of its M values not finite (NaN or infinite)" where any is.
void refuse_non_finite(const std::vector<float>& values, const std::string& what);
// The model's initial parameters (brigade init).
SafeTensorsWriter initial_parameters(const model::Model& m, uint64_t seed);

// `input`: F32 images [N, ...model.input] or I32/I64 tokens [N, T]; `target`: I32/I64 [N]
// or [N, T], each in [0, classes).
pipeline::Batch read_batch(const SafeTensors& file, const model::Model& m);
// The model that runs the batch in `file`: a GPT given token windows [N, T] shorter than its
// block_size runs T positions (model::with_window); any other model is returned as it is.
model::Model model_for_batch(model::Model m, const SafeTensors& file);

}  // namespace brigade::io
